"""Logging filters referenced from settings.LOGGING."""

import logging


class ClientErrorWithoutTraceback(logging.Filter):
    """Django logs a request with a Host header outside ALLOWED_HOSTS at ERROR, with the traceback of
    the DisallowedHost it raised. The client sent bad input and got its 400: one WARNING line says
    so, and a flood of such requests (scanners send them) does not fill the log with tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True
