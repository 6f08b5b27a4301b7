"""``delegations/``: lend your approval rights to someone for a period (out of office),
list what you lent and were lent, and revoke a delegation at once (docs/delegation.md).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from ..approvals.delegated import delegate, delegations_of, may_revoke, revoke
from ..models import Delegation
from . import docs
from .permissions import IsActiveUser
from .serializers import StrictCharField
from .views import DeuzAPIView


class DelegationSerializer(serializers.ModelSerializer[Delegation]):
    """A delegation: ``delegate`` decides what ``delegator`` may decide, on the runs
    ``delegate`` may see, while it is in force."""

    id = serializers.IntegerField(read_only=True)
    delegator = serializers.CharField(source="delegator.get_username")
    delegate = serializers.CharField(source="delegate.get_username")
    startsAt = serializers.DateTimeField(source="starts_at")
    endsAt = serializers.DateTimeField(source="ends_at")
    createdAt = serializers.DateTimeField(source="created_at")
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    inForce = serializers.BooleanField(source="in_force")

    class Meta:
        model = Delegation
        fields = [
            "id",
            "delegator",
            "delegate",
            "startsAt",
            "endsAt",
            "note",
            "createdAt",
            "revokedAt",
            "inForce",
        ]


class DelegateSerializer(serializers.Serializer[Any]):
    """Lend your approval rights to ``delegate`` (a username) until ``endsAt``."""

    delegate = StrictCharField(max_length=150, help_text="The delegate's username.")
    startsAt = serializers.DateTimeField(required=False, help_text="Now by default.")
    endsAt = serializers.DateTimeField()
    note = StrictCharField(max_length=200, required=False, allow_blank=True)

    def validate_delegate(self, value: str) -> Any:
        found = get_user_model()._default_manager.filter(
            **{get_user_model().USERNAME_FIELD: value}
        )
        user = found.first()
        if user is None:
            raise serializers.ValidationError("No user with this username.", "unknown")
        return user


DELEGATION_ID = OpenApiParameter(
    "delegationId", int, OpenApiParameter.PATH, description="The delegation's id."
)

list_delegations = docs.operation(
    operation_id="listDelegations",
    summary="List your delegations",
    description="The delegations you gave and the ones you received, newest first, "
    "with whether each is in force now.",
    tags=["delegations"],
    responses={200: DelegationSerializer(many=True), **docs.errors(docs.READ)},
)

create_delegation = docs.operation(
    operation_id="createDelegation",
    summary="Lend your approval rights",
    description="Out of office: until `endsAt` (from `startsAt`, now by default) the "
    "delegate may decide what you may decide with your own rights, on the runs they "
    "may see. Their decisions record that they decided on your behalf. Rights others "
    "lent you do not pass on; an owner who may not approve their own calls may not "
    "approve them on anyone's behalf either.",
    tags=["delegations"],
    request=DelegateSerializer,
    responses={201: DelegationSerializer, **docs.errors(docs.WRITE)},
    examples=[
        OpenApiExample(
            "Out of office",
            value={
                "delegate": "bob",
                "endsAt": "2026-12-24T18:00:00Z",
                "note": "Holidays",
            },
            request_only=True,
        )
    ],
)

revoke_delegation = docs.operation(
    operation_id="revokeDelegation",
    summary="Revoke a delegation",
    description="At once: a verdict the delegate is recording right now either "
    "finishes first or is refused. Its delegator may revoke it, and users holding "
    "`deuz_django.change_delegation`.",
    tags=["delegations"],
    parameters=[DELEGATION_ID],
    request=None,
    responses={200: DelegationSerializer, **docs.errors(docs.WRITE)},
)


class DelegationsView(DeuzAPIView):
    """Your delegations; posting one lends your approval rights."""

    permission_classes = [IsActiveUser]
    serializer_class = DelegationSerializer

    @list_delegations
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(delegations_of(request.user))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @create_delegation
    def post(self, request: Request) -> Response:
        body = self.read(DelegateSerializer, request.data)
        try:
            made = delegate(
                request.user,
                body["delegate"],
                ends_at=body["endsAt"],
                starts_at=body.get("startsAt"),
                note=body.get("note", ""),
            )
        except ValueError as error:
            field, _, problem = str(error).partition(": ")
            raise serializers.ValidationError({field: [problem]}) from None
        return Response(self.get_serializer(made).data, status=status.HTTP_201_CREATED)


class DelegationRevokeView(DeuzAPIView):
    """Revoke one delegation now."""

    permission_classes = [IsActiveUser]
    serializer_class = DelegationSerializer

    @revoke_delegation
    def post(self, request: Request, delegationId: int) -> Response:
        delegation = Delegation.objects.filter(pk=delegationId).first()
        if delegation is None or not (
            delegations_of(request.user).filter(pk=delegation.pk).exists()
            or may_revoke(request.user, delegation)
        ):
            raise NotFound(f"No delegation with id {delegationId}.")
        if not may_revoke(request.user, delegation):
            raise PermissionDenied("Only its delegator may revoke this delegation.")
        revoke(delegation, by=request.user)
        return Response(self.get_serializer(delegation).data)
