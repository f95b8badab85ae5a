"""What the staff API reads and writes: an approval (pending, or in full), a decision, and the
decision's result, as DRF serializers whose help texts are the API's documentation (/api/docs/)."""

from __future__ import annotations

from rest_framework import serializers

from ..models import ApprovalRequest


class PolicyFields(serializers.ModelSerializer):
    required_by = serializers.CharField(
        help_text='The policy that sent the call to staff, or "the tool\'s high_risk flag".'
    )
    approvals_given = serializers.IntegerField(help_text="Staff approvals so far (M of N: approvals_required).")
    approver_group = serializers.StringRelatedField(
        help_text="The group whose members decide it (its policy's; moved on by escalation), or null: any decider."
    )
    digest = serializers.CharField(
        help_text="SHA-256 of the canonical JSON (RFC 8785) of the graph, the tool calls, the caller and the policy "
        "(id and version): the action as requested."
    )
    policy_version = serializers.IntegerField(
        allow_null=True, help_text="The version of the policy when the call was requested (null: no policy)."
    )
    current_policy_version = serializers.IntegerField(
        allow_null=True, help_text="Its version now; 0 once deleted. A decision must confirm it when it differs."
    )
    policy_changed = serializers.BooleanField(
        help_text="The policy changed since the request: send seen_policy_version with the decision."
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "required_by",
            "approvals_required",
            "approvals_given",
            "approver_group",
            "digest",
            "policy_version",
            "current_policy_version",
            "policy_changed",
        ]


class PendingApprovalSerializer(PolicyFields):
    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "thread_id",
            "graph",
            "tool_calls",
            "visitor_message",
            "created_at",
            "expires_at",
            *PolicyFields.Meta.fields,
        ]


class ApprovalSerializer(PolicyFields):
    decided_by = serializers.CharField(source="decider", help_text="Who decided, and through which door.")
    attempts = serializers.SerializerMethodField(
        help_text="Every attempt at this call, oldest first, this one included: each revision the agent made "
        "after staff requested changes is an approval of its own. One id when nobody requested changes."
    )

    def get_attempts(self, approval: ApprovalRequest) -> list[str]:
        return [str(attempt.pk) for attempt in approval.attempts()]

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "thread_id",
            "graph",
            "tool_calls",
            "edited_tool_calls",
            "approved_digest",
            "visitor_message",
            "status",
            *PolicyFields.Meta.fields,
            "note",
            "decided_by",
            "decided_at",
            "answer",
            "answered_at",
            "error",
            "created_at",
            "expires_at",
            "revision_of",
            "attempts",
        ]


class JSONBooleanField(serializers.BooleanField):
    """Only JSON true or false. DRF's BooleanField also takes "yes", "on", 1 and the like, and only an
    explicit approved: true may reach the run (docs/rules.md, "Fail closed")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class DecisionSerializer(serializers.Serializer):
    approved = JSONBooleanField(required=False, help_text="true approves, false rejects. Or give request_changes.")
    request_changes = serializers.CharField(
        required=False,
        trim_whitespace=False,
        help_text="Instead of approved: what must change. Nothing runs; the agent's run receives "
        '{"approved": false, "changes_requested": true, "note": <this text>}, and its revised call is a new '
        "approval whose revision_of is this one.",
    )
    # Passed to the model verbatim (the article's test checks it word for word), so not trimmed.
    note = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False, default=None)
    on_behalf_of = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=150,
        help_text="The username of the staff member whose delegate you are, to decide on their behalf (their "
        "approver groups; the audit names you both). Only within the delegation's period.",
    )
    arguments = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        allow_null=True,
        default=None,
        help_text="With approved: true, the arguments each tool call runs with instead of the agent's: one "
        "JSON object per call of tool_calls, in order, checked against the tool's parameters schema. What "
        "runs, is archived and is shown in the audit beside the original. Ignored on a rejection; a second "
        "approval cannot change the arguments the first approved.",
    )
    seen_policy_version = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        help_text="When the approval's policy changed since the request (policy_changed), the decision is refused "
        "until it names the policy's current version (current_policy_version; 0 when it was deleted).",
    )

    def validate(self, attrs):
        if "approved" not in attrs and "request_changes" not in attrs:
            raise serializers.ValidationError(
                {"approved": ["This field is required: true or false. Or give request_changes: what must change."]}
            )
        if "approved" in attrs and "request_changes" in attrs:
            raise serializers.ValidationError(
                {"request_changes": ["Give either approved (true or false) or request_changes, not both."]}
            )
        if "request_changes" in attrs and not attrs["request_changes"].strip():
            raise serializers.ValidationError({"request_changes": ["Say what must change."]})
        return attrs


class DecisionResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[
            ApprovalRequest.Status.APPROVED,
            ApprovalRequest.Status.REJECTED,
            ApprovalRequest.Status.CHANGES_REQUESTED,
            ApprovalRequest.Status.PENDING,
        ],
        help_text="pending: an approval is in, and more are needed (M of N; progress says how many). "
        "changes_requested: the agent is revising its call; answer is what it said, and revised_approval_id "
        "the revised call's approval once it asked again.",
    )
    approval_id = serializers.UUIDField()
    thread_id = serializers.CharField()
    answer = serializers.CharField(allow_null=True, help_text="The resumed run's final answer; null while it runs.")
    approvals_given = serializers.IntegerField()
    approvals_required = serializers.IntegerField()
    progress = serializers.CharField(required=False, help_text='"1 of 2" while more approvals are needed.')
    digest = serializers.CharField(help_text="The digest of the action as requested.")
    approved_digest = serializers.CharField(
        help_text="The digest of what was approved to run (another one when the arguments were edited); empty "
        "on a rejection or while approvals are still missing."
    )
    error = serializers.CharField(required=False, help_text="Present when the resumed run failed.")
    revised_approval_id = serializers.UUIDField(
        required=False, help_text="After request_changes: the approval of the agent's revised call."
    )
