"""The logging configuration's code: how settings.LOGGING is applied (LOGGING_CONFIG), and the
filters it names."""

import ast
import logging
import logging.config
import re

from opentelemetry import trace

from graph_runtime import log_context


def configure(config: dict) -> None:
    """settings.LOGGING_CONFIG: Django's dictConfig, and Python's warnings (a library's
    DeprecationWarning, Celery's SecurityWarning when a worker runs as root) written as log lines by
    the same handler (logger `py.warnings`), so that with LOG_FORMAT=json they are JSON lines too;
    Django no longer does this itself."""
    logging.captureWarnings(True)
    logging.config.dictConfig(config)
    # Every line through the project's handler is redacted by the dictConfig's handler filter.
    # uvicorn's loggers, and Django's development server's, have handlers of their own, given
    # before (configuring them in the dictConfig would replace those): the filter goes on them.
    for name in OWN_HANDLER_LOGGERS:
        logging.getLogger(name).addFilter(AnswerLinksRedacted())


# The loggers with handlers of their own that write a request's path: uvicorn's access log and
# errors, and the request lines of Django's development server (runserver, live_server).
OWN_HANDLER_LOGGERS = ("uvicorn.access", "uvicorn.error", "django.server")
# An answer page's link is a capability (mcp_gateway/wires/pages/links.py): never logged in full,
# in a path or in a query string, where the login page's `next` carries it, percent-encoded or not.
ANSWER_LINK = re.compile(r"(/answer/|%2Fanswer%2F)[^/?#&%\s\"']+", re.IGNORECASE)


def redacted(text: str) -> str:
    return ANSWER_LINK.sub(r"\1[redacted]", text)


class AnswerLinksRedacted(logging.Filter):
    """A request line or path that holds an answer page's link is logged with the link cut out.
    The arguments are rewritten one by one, not merged into the message: uvicorn's access
    formatter reads them by position."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redacted(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redacted(v) if isinstance(v, str) else v for k, v in record.args.items()}
        request = getattr(record, "request", None)
        if request is not None and ANSWER_LINK.search(shown := repr(request)):
            # Django passes the request along (extra): a JSON line would print it, path, query and all.
            record.request = redacted(shown)
        return True


class ClientErrorWithoutTraceback(logging.Filter):
    """Django logs a request with a Host header outside ALLOWED_HOSTS at ERROR, with the traceback of
    the DisallowedHost it raised. The client sent bad input and got its 400: one WARNING line says
    so, and a flood of such requests (scanners send them) does not fill the log with tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


class PeriodicJobsQuietWhenIdle(logging.Filter):
    """Celery's own lines about beat's periodic jobs are DEBUG, not INFO: beat's "Sending due task",
    the worker's "Task … received", and its "Task … succeeded" when the job did nothing (every count
    it returns is 0). The stalled-run checks alone run every STALLED_CHECK_SECONDS, and at INFO their
    no-op lines were a fifth of the log. What a job does is logged by the job itself (calls removed,
    a round enqueued again, approvals expired), and its "succeeded" line with the counts stays INFO."""

    def __init__(self, tasks: list[str]):
        super().__init__()
        self.tasks = frozenset(tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    def _routine(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "celery.beat":
            # "Scheduler: Sending due task %s (%s)", entry name and task name
            return isinstance(args, tuple) and len(args) == 2 and args[1] in self.tasks
        if not isinstance(args, dict) or args.get("name") not in self.tasks:
            return False
        if record.name == "celery.worker.strategy":  # "Task %(name)s[%(id)s] received"
            return True
        # celery.app.trace's "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s",
        # the return value as Celery's saferepr wrote it: a dict of counts.
        return "return_value" in args and _all_zero(args["return_value"])


def _all_zero(text: object) -> bool:
    try:
        counts = ast.literal_eval(str(text))
    except Exception:  # not a literal (a filter that raised would fail the logging call: the task)
        return False
    return isinstance(counts, dict) and not any(counts.values())


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
