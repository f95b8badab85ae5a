from django import forms


class DecisionForm(forms.Form):
    """The admin's decision: which button was pressed, and an optional note for the model."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    # strip=False: the note reaches the model verbatim.
    note = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Optional. On a rejection the model tells the visitor this reason.",
    )
    # The version of the approval's rule the decider confirms having seen, when the rule changed
    # since the request (services.PolicyChanged); 0: confirmed it was deleted.
    seen_policy_version = forms.IntegerField(required=False, min_value=0)


class JSONValueField(forms.JSONField):
    """A policy's JSON value on one line, empty rather than `null` when there is none: Django's
    JSONField shows None as the text null, which reads as a value the rule compares with."""

    widget = forms.TextInput

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)
