"""The e-mail backend of a deployment without EMAIL_URL: each e-mail written to the log, at INFO.

Django's console backend prints to stdout, which a Celery worker (where approval e-mails are sent
from) logs as WARNING, beside real warnings: an operator alerting on WARNING was paged for every
approval. Logged here instead, the e-mail is what it is: information.
"""

import logging

from django.core.mail.backends import console

logger = logging.getLogger("hitl_project.mail")


class EmailBackend(console.EmailBackend):
    def write_message(self, message) -> None:
        msg = message.message()
        charset = msg.get_charset().get_output_charset() if msg.get_charset() else "utf-8"
        logger.info("%s", msg.as_bytes().decode(charset))
