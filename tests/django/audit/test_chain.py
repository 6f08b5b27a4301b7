"""The audit chain: each record linked to the one before by its digest, per tenant,
append-only, and written in the transaction of the act it records."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from deuz_django import audit
from deuz_django.audit.chain import canonical_json, digest_of, linked_fields
from deuz_django.models import AuditChainHead, AuditRecord
from deuz_django.models.audit import GENESIS, AppendOnly

from .support import chain

pytestmark = pytest.mark.django_db


def test_each_record_follows_the_digest_of_the_one_before() -> None:
    first = audit.append("decision", run_id="r1", details={"status": "approved"})
    second = audit.append("stop", run_id="r1", details={"reason": "enough"})

    assert (first.sequence, first.previous_digest) == (1, GENESIS)
    assert (second.sequence, second.previous_digest) == (2, first.digest)
    assert AuditChainHead.objects.get(tenant="").digest == second.digest


def test_the_digest_is_sha256_of_the_canonical_json_of_the_fields() -> None:
    record = audit.append("decision", details={"b": 1, "a": [1, "é"]})
    stored = AuditRecord.objects.get(pk=record.pk)  # after the database's round trip

    fields = linked_fields(stored)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    assert stored.digest == hashlib.sha256(text.encode()).hexdigest()
    assert digest_of(fields) == stored.digest
    assert canonical_json({"b": 1, "a": None}) == '{"a":null,"b":1}'
    assert fields["previousDigest"] == GENESIS


def test_the_actor_is_kept_by_id_and_name_and_outlives_the_user() -> None:
    ann = User.objects.create_user("ann")
    record = audit.append("decision", user=ann, run_id="r1")
    ann.delete()

    stored = AuditRecord.objects.get(pk=record.pk)
    assert (stored.actor_id, stored.actor_name, stored.actor) == (
        str(record.actor_id),
        "ann",
        "ann",
    )
    assert audit.verify_chain().intact


def test_an_operator_or_the_system_acts_without_a_user() -> None:
    by_operator = audit.append("stop", operator="night shift")
    by_system = audit.append("recovery")
    assert by_operator.actor == "night shift (operator)"
    assert (by_system.actor_id, by_system.actor) == ("", "the system")


def test_a_record_is_never_saved_again_nor_deleted() -> None:
    record = audit.append("decision", details={"status": "approved"})
    record.details = {"status": "denied"}
    with pytest.raises(AppendOnly):
        record.save()
    with pytest.raises(AppendOnly):
        record.delete()
    with pytest.raises(AppendOnly):
        AuditRecord.objects.filter(pk=record.pk).update(action="stop")
    with pytest.raises(AppendOnly):
        AuditRecord.objects.all().delete()
    assert AuditRecord.objects.get(pk=record.pk).details == {"status": "approved"}


def test_a_rolled_back_act_leaves_no_record_and_no_gap() -> None:
    audit.append("decision")

    def act_that_fails() -> None:
        with transaction.atomic():
            audit.append("stop")
            raise RuntimeError("the act failed")

    with pytest.raises(RuntimeError):
        act_that_fails()
    audit.append("fork")

    assert chain() == [(1, "decision"), (2, "fork")]
    assert audit.verify_chain().intact


def test_each_tenant_has_a_chain_of_its_own() -> None:
    audit.append("decision", tenant="acme")
    audit.append("decision")
    audit.append("stop", tenant="acme")

    assert chain(tenant="acme") == [(1, "decision"), (2, "stop")]
    assert chain(tenant="") == [(1, "decision")]
    genesis = AuditRecord.objects.get(tenant="", sequence=1).previous_digest
    assert genesis == GENESIS
    report = audit.verify_chain()
    assert (report.count, report.intact) == (3, True)
    assert audit.verify_chain("acme").count == 2


def test_appends_held_to_the_end_of_a_block_are_written_as_it_ends() -> None:
    audit.append("decision")
    with audit.held_to_the_end():
        assert audit.append("edit") is None
        with audit.held_to_the_end():
            audit.append("grant")
        assert chain() == [(1, "decision")]
    assert chain() == [(1, "decision"), (2, "edit"), (3, "grant")]


def test_appends_held_by_a_block_that_raises_are_dropped() -> None:
    def batch_that_fails() -> None:
        with audit.held_to_the_end():
            audit.append("decision")
            raise RuntimeError("the batch failed")

    with pytest.raises(RuntimeError):
        batch_that_fails()
    audit.append("stop")
    assert chain() == [(1, "stop")]
