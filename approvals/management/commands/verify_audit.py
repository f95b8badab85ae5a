"""`python manage.py verify_audit`: recompute the audit chain from its first event and name the
first broken link (approvals/audit.py). Exits 1 when the chain is broken, 0 when it holds.

The head row lives in the same database as the events, so a tail cut with SQL (the head row moved
back with it) still verifies on its own. `--expect-head <seq>:<hash>` (a head published as it was
appended: the `approvals.audit.head` log line) or `--expect-head-from <file>` (an earlier export,
whose last event is the head it reached) holds the chain to a head recorded elsewhere.

Each decision confirmed with a passkey is verified again too, offline (passkeys.reverify_all): its
stored assertion's signature with the public key it was verified with, for the challenge derived
again from the approval's digest as it is now, and against what its audit event recorded. A stored
signature or authenticator data altered since, or an approval's digest changed, fails it."""

from django.core.management.base import BaseCommand, CommandError

from approvals import audit, passkeys


class Command(BaseCommand):
    help = "Recompute the hash chain of the approvals audit and name the first broken link."

    def add_arguments(self, parser):
        parser.add_argument(
            "--expect-head",
            metavar="SEQ:HASH",
            help="a head recorded outside the database that the chain must still reach, with that hash",
        )
        parser.add_argument(
            "--expect-head-from",
            metavar="FILE",
            help="an earlier export (JSON Lines): the chain must still reach its last event, with its hash",
        )

    def handle(self, *args, **options):
        expected = self._expected(options["expect_head"], options["expect_head_from"])
        checked, broken = audit.verify(expected)
        proofs, failures = passkeys.reverify_all()
        if broken is not None:
            raise CommandError("\n".join([f"{broken} (the {checked} before it hold.)", *failures]))
        if failures:
            raise CommandError("\n".join([*failures, f"({len(failures)} of {proofs} passkey confirmations fail.)"]))
        against = f", up to the head recorded elsewhere, {expected}" if expected else ""
        self.stdout.write(f"The audit chain holds: {checked} events{against}.")
        if proofs:
            self.stdout.write(f"Passkey confirmations verified again: {proofs}.")

    def _expected(self, head: str | None, path: str | None) -> audit.Head | None:
        if head and path:
            raise CommandError("Give --expect-head or --expect-head-from, not both.")
        try:
            if head:
                return audit.parse_head(head)
            if path:
                with open(path, encoding="utf-8") as export:
                    return audit.head_of_export(export)
        except audit.BadHead as bad:
            raise CommandError(f"No head to check against: {bad}") from None
        except (OSError, UnicodeDecodeError) as unreadable:
            raise CommandError(f"No head to check against: {path} cannot be read ({unreadable}).") from None
        return None
