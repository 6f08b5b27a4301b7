"""The demo shop's tables: orders the support agent looks up and refunds, and the refunds
and emails it made — each under its call's idempotency key, so a repeat is a no-op."""

from __future__ import annotations

from decimal import Decimal

from django.db import models


class Order(models.Model):
    number = models.CharField(max_length=20, unique=True)
    customer_email = models.EmailField()
    item = models.CharField(max_length=200)
    total = models.DecimalField(max_digits=8, decimal_places=2)
    status = models.CharField(max_length=20, default="delivered")
    refunded = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("0"))

    class Meta:
        ordering = ["number"]
        permissions = [("approve_refund", "Can approve refunds")]

    def __str__(self) -> str:
        return self.number


class Refund(models.Model):
    """One refund, made once per tool call (``ToolContext.idempotency_key``)."""

    idempotency_key = models.CharField(max_length=64, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="refunds")
    amount = models.DecimalField(max_digits=8, decimal_places=2)

    def __str__(self) -> str:
        return f"{self.amount} on {self.order}"


class SentEmail(models.Model):
    """One email, sent once per tool call (``ToolContext.idempotency_key``)."""

    idempotency_key = models.CharField(max_length=64, unique=True)
    to = models.CharField(max_length=254)
    subject = models.CharField(max_length=200)
    body = models.TextField()

    def __str__(self) -> str:
        return f"{self.subject} to {self.to}"
