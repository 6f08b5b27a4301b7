"""The demo shop's one table: orders the support agent looks up and refunds."""

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
