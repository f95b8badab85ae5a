"""The staff side's models, one module a subject: approvals.py (ApprovalRequest, its Signoffs, the
ContactMessages it let through), policies.py (ApprovalPolicy and its PolicyApproverGroups),
staff.py (Delegation, StaffTokenName, StaffIdentity, PasswordThrottle, StaffPasskey and the
PasskeyNonces and PasskeyProofs of its use), records.py (AuditEvent, AuditHead, SpentKey).
All are importable from here, where Django and the migrations look for them."""

from .approvals import DECIDE_PERMISSION, ApprovalRequest, ContactMessage, DecidedVia, Signoff
from .policies import MAX_APPROVALS, ApprovalPolicy, Operator, Outcome, PolicyApproverGroup, is_json_number
from .records import AuditEvent, AuditHead, SpentKey
from .staff import (
    Delegation,
    PasskeyNonce,
    PasskeyProof,
    PasswordThrottle,
    StaffIdentity,
    StaffPasskey,
    StaffTokenName,
)

__all__ = [
    "DECIDE_PERMISSION",
    "MAX_APPROVALS",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AuditEvent",
    "AuditHead",
    "ContactMessage",
    "DecidedVia",
    "Delegation",
    "Operator",
    "Outcome",
    "PasskeyNonce",
    "PasskeyProof",
    "PasswordThrottle",
    "PolicyApproverGroup",
    "Signoff",
    "SpentKey",
    "StaffIdentity",
    "StaffPasskey",
    "StaffTokenName",
    "is_json_number",
]
