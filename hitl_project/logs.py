"""Logging filters referenced from settings.LOGGING."""

import logging

from opentelemetry import trace

from graph_runtime import log_context


class ClientErrorWithoutTraceback(logging.Filter):
    """Django logs a request with a Host header outside ALLOWED_HOSTS at ERROR, with the traceback of
    the DisallowedHost it raised. The client sent bad input and got its 400: one WARNING line says
    so, and a flood of such requests (scanners send them) does not fill the log with tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


class AboutTheCall(logging.Filter):
    """Adds what the line is about (graph_runtime/log_context.py: the call id, round, tool,
    caller, graph) and, while a span is recording, its trace and span ids. A JSON line gets them as
    fields of its own; a plain line ends with them as `key=value` pairs (`about`)."""

    def __init__(self, json: bool = False):
        super().__init__()
        self.json = json

    def filter(self, record: logging.LogRecord) -> bool:
        fields = dict(log_context.current())
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            fields["trace_id"], fields["span_id"] = format(span.trace_id, "032x"), format(span.span_id, "016x")
        if self.json:
            for name, value in fields.items():
                setattr(record, name, value)
        else:
            record.about = "".join(f" {name}={value}" for name, value in fields.items())
        return True
