"""Page-number pagination whose query parameters are validated, not silently ignored."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import PageNumberPagination

from .exceptions import InvalidRequest
from .serializers import MAX_SAFE_INTEGER


def _positive(
    request: Any, name: str, *, maximum: int = MAX_SAFE_INTEGER
) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    digits = raw.isascii() and raw.isdigit()
    if not digits or not raw.strip("0"):
        raise InvalidRequest(
            f"{name}: must be a positive integer.",
            errors=[{"field": name, "message": "must be a positive integer"}],
        )
    # Compared as text first: int() refuses numbers over 4,300 digits.
    if len(raw.lstrip("0")) > len(str(maximum)) or int(raw) > maximum:
        raise InvalidRequest(
            f"{name}: must be at most {maximum}.",
            errors=[{"field": name, "message": f"must be at most {maximum}"}],
        )
    return int(raw)


class DeuzPagination(PageNumberPagination):
    """``?page=2&pageSize=50`` (50 by default, at most 200)."""

    page_size = 50
    page_size_query_param = "pageSize"
    max_page_size = 200

    def get_page_size(self, request: Any) -> int:
        size = _positive(request, "pageSize", maximum=self.max_page_size)
        return self.page_size if size is None else size

    def get_page_number(self, request: Any, paginator: Any) -> int:
        number = _positive(request, self.page_query_param)
        return 1 if number is None else number

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            parameter["schema"]["maximum"] = (
                self.max_page_size
                if parameter["name"] == self.page_size_query_param
                else MAX_SAFE_INTEGER
            )
        return parameters
