"""The staff side in the Django admin, one module a job: queue.py (the list of approvals, the
dashboard, the decision page), deciding.py (the decision's POST and the bulk actions), policies.py
(approval policies and delegations), records.py (the audit chain, contact messages, API tokens,
Slack identities). Importing them registers their ModelAdmins (Django's autodiscovery imports this
package)."""

from . import deciding, policies, queue, records

__all__ = ["deciding", "policies", "queue", "records"]
