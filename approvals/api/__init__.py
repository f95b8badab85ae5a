"""The staff REST API, in DRF: views.py (the endpoints, and what each answers), auth.py (the two
kinds of token, the permissions, the JSON-only parsing and errors), serializers.py (the bodies)."""

from .auth import exception_handler
from .views import ApprovalDetail, ApprovalQueue, AuditExport, not_found

__all__ = ["ApprovalDetail", "ApprovalQueue", "AuditExport", "exception_handler", "not_found"]
