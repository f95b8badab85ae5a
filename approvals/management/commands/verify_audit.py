"""`python manage.py verify_audit`: recompute the audit chain from its first event and name the
first broken link (approvals/audit.py). Exits 1 when the chain is broken, 0 when it holds."""

from django.core.management.base import BaseCommand, CommandError

from approvals import audit


class Command(BaseCommand):
    help = "Recompute the hash chain of the approvals audit and name the first broken link."

    def handle(self, *args, **options):
        checked, broken = audit.verify()
        if broken is not None:
            raise CommandError(f"{broken} (the {checked} before it hold.)")
        self.stdout.write(f"The audit chain holds: {checked} events.")
