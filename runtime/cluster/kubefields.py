"""Reading fields of Kubernetes object dicts, each problem named by its field path.

Every reader raises `FieldError` with a message that names the field (`spec.minMember must be
an integer, found x`); runtime.cluster.objects turns it into an ObjectProblem naming the object.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from compiler.quantities import to_base_units
from runtime.cluster.selectors import LabelSelector, MatchExpression


class FieldError(Exception):
    """A field of an object is missing or malformed; the message names the field."""


def mapping(obj: Any, key: str, required: bool = False) -> dict:
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None:
        if required:
            raise FieldError(f"missing `{key}`")
        return {}
    if not isinstance(value, dict):
        raise FieldError(f"`{key}` must be a mapping, found {type(value).__name__}")
    return value


def listing(obj: dict, key: str) -> list:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(f"`{key}` must be a list, found {type(value).__name__}")
    return value


def name_of(obj: dict) -> tuple[str, str]:
    meta = mapping(obj, "metadata", required=True)
    name = meta.get("name")
    if not name or not isinstance(name, str):
        raise FieldError("missing `metadata.name`")
    return str(meta.get("namespace") or "default"), name


def resources(values: Any, where: str) -> dict[str, int]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise FieldError(f"`{where}` must be a mapping of resource quantities")
    out = {}
    for resource, quantity in values.items():
        try:
            out[str(resource)] = to_base_units(str(resource), quantity if isinstance(quantity, (int, float)) else str(quantity))
        except ValueError as err:
            raise FieldError(f"`{where}.{resource}`: {err}") from None
    return out


def integer(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise FieldError(f"`{where}` must be an integer, found `{value}`")
    try:
        return int(value)
    except ValueError:
        raise FieldError(f"`{where}` must be an integer, found `{value}`") from None


def timestamp(meta: dict) -> float:
    value = meta.get("creationTimestamp")
    if value is None:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise FieldError(f"`metadata.creationTimestamp` is not a timestamp: `{value}`") from None


def uid_of(meta: dict, namespace: str, name: str) -> str:
    return str(meta.get("uid") or uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}"))


def strings(values: Any, where: str) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise FieldError(f"`{where}` must be a mapping of strings")
    return {str(k): str(v) for k, v in values.items()}


# --- selectors (node affinity terms, label selectors) ---------------------------------------

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_NAME_FIELD = "metadata.name"


def expression(raw: Any, where: str, operators: tuple[str, ...], field: bool = False) -> MatchExpression:
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping, found {type(raw).__name__}")
    op, key = raw.get("operator"), raw.get("key")
    if not key or not isinstance(key, str):
        raise FieldError(f"`{where}.key` is missing")
    if op not in operators:
        raise FieldError(f"`{where}.operator` must be one of {', '.join(operators)}, found `{op}`")
    values = tuple(str(v) for v in listing(raw, "values"))
    if op in ("In", "NotIn") and not values:
        raise FieldError(f"`{where}.values` must not be empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and values:
        raise FieldError(f"`{where}.values` must be empty for operator {op}")
    if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise FieldError(f"`{where}.values` must be one integer for operator {op}")
    if field and key != NODE_NAME_FIELD:
        raise FieldError(f"`{where}.key` must be {NODE_NAME_FIELD} (the only node field), found `{key}`")
    return MatchExpression(key, op, values, field)


def node_selector_terms(raw: list, where: str) -> tuple[tuple[MatchExpression, ...], ...]:
    terms = []
    for i, term in enumerate(raw):
        if not isinstance(term, dict):
            raise FieldError(f"`{where}[{i}]` must be a mapping")
        exprs = [expression(e, f"{where}[{i}].matchExpressions[{k}]", SELECTOR_OPERATORS + ("Gt", "Lt"))
                 for k, e in enumerate(listing(term, "matchExpressions"))]
        exprs += [expression(e, f"{where}[{i}].matchFields[{k}]", ("In", "NotIn"), field=True)
                  for k, e in enumerate(listing(term, "matchFields"))]
        terms.append(tuple(exprs))
    return tuple(terms)


def label_selector(raw: Any, where: str) -> LabelSelector | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise FieldError(f"`{where}` must be a mapping, found {type(raw).__name__}")
    labels = strings(raw.get("matchLabels"), f"{where}.matchLabels")
    exprs = tuple(expression(e, f"{where}.matchExpressions[{k}]", SELECTOR_OPERATORS)
                  for k, e in enumerate(listing(raw, "matchExpressions")))
    return LabelSelector(tuple(sorted(labels.items())), exprs)
