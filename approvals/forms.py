from django import forms


class DecisionForm(forms.Form):
    """The admin's decision: which button was pressed, and a note for the model (optional, except
    with a request for changes, where it says what must change)."""

    decision = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject"), ("request_changes", "Request changes")]
    )
    # strip=False: the note reaches the model verbatim.
    note = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Optional, except to request changes. On a rejection the model tells the visitor this reason; "
        "on a request for changes it revises its call as the note says and asks again.",
    )
    # The version of the approval's rule the decider confirms having seen, when the rule changed
    # since the request (refusals.PolicyChanged); 0: confirmed it was deleted.
    seen_policy_version = forms.IntegerField(required=False, min_value=0)

    # The staff member the decider is a delegate of (their username), when acting for them.
    on_behalf_of = forms.CharField(required=False, max_length=150)

    def clean(self):
        cleaned = super().clean() or {}
        if cleaned.get("decision") == "request_changes" and not (cleaned.get("note") or "").strip():
            self.add_error("note", "Say what must change: the agent revises its call from your note.")
        return cleaned


class JSONValueField(forms.JSONField):
    """A policy's JSON value on one line, empty rather than `null` when there is none: Django's
    JSONField shows None as the text null, which reads as a value the rule compares with."""

    widget = forms.TextInput

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


class LinkedDecisionForm(forms.Form):
    """The confirmation page of an e-mail's Approve or Reject link: the decision is the link's."""

    note = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Optional. On a rejection the model tells the visitor this reason.",
    )
