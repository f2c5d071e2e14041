"""CEL device selectors of Dynamic Resource Allocation, evaluated as kube's DRA CEL environment
(k8s.io/dynamic-resource-allocation/cel) does, on Google's CEL runtime (cel-expr-python).

The environment: one variable, `device`, with `driver` (string), `attributes` and `capacity`
(maps by domain of maps by name). An attribute or capacity named without a domain is under the
device's driver (`model` of driver `gpu.example.com` is `device.attributes["gpu.example.com"].model`).
Looking up a domain the device has none of gives an empty map (kube's mapper with a default), so
`"model" in device.attributes["other.example.com"]` is false rather than an error; a missing name
inside a domain is a runtime error, as in kube. The kube libraries a selector may call:

- quantities: `quantity("10Gi")`, `isQuantity(s)`, and on a quantity `compareTo`, `isGreaterThan`,
  `isLessThan`, `add`, `sub`, `asInteger`, `asApproximateFloat`, `isInteger`, `sign`. A quantity is
  held as an integer count of thousandths (so `500m` and `10Gi` are both exact);
- semantic versions (version attributes): `semver("1.2.3")`, `isSemver(s)`, and on a version
  `compareTo`, `isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`; a version is held as its
  canonical text;
- `cel.bind` (CEL's bindings extension, as kube enables).

A quantity is thus an int and a version a string to CEL: comparisons kube's type checker refuses
(a quantity with an int literal) are answered here instead of refused at compile time. Every
expression is compiled once per process (`compile_selector`, cached by its text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

# Google's CEL (cel-cpp) for Python: about 7 µs an evaluation where the pure-Python cel-python
# takes about 660 µs (measured on the selector of the DRA docs' example), which matters with a
# selector evaluated for each device of each node a pod is tried on.
from cel_expr_python import cel
from cel_expr_python.ext.ext_bindings import ExtBindings

from compiler.quantities import to_base_units

T = cel.Type
MILLI = 1000
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")
_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


class CelError(Exception):
    """A selector that does not compile, or fails when evaluated on a device (kube's words:
    `CEL compile error: ...`, `CEL runtime error: ...`)."""


# --- quantities (thousandths) -------------------------------------------------------------

def quantity_milli(text: str | int | float) -> int:
    """A Kubernetes quantity as thousandths of its unit: `quantity_milli("500m") == 500`,
    `quantity_milli("1Ki") == 1024000`. Raises ValueError on bad text."""
    return to_base_units("cpu", text if isinstance(text, (int, float)) else str(text))


def _quantity(text: str) -> int:
    return quantity_milli(text)


def _is_quantity(text: str) -> bool:
    try:
        quantity_milli(text)
    except ValueError:
        return False
    return True


def _compare_int(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _as_integer(q: int) -> int:
    if q % MILLI:
        raise ValueError("quantity is not an integer")
    return q // MILLI


# --- semantic versions --------------------------------------------------------------------

def semver_key(text: str) -> tuple:
    """Precedence key of a semantic version (semver 2.0.0: build metadata ignored, a release
    above its pre-releases, numeric identifiers below alphanumeric ones)."""
    m = _SEMVER.match(text)
    if m is None:
        raise ValueError(f"invalid semantic version {text!r}")
    major, minor, patch, pre, _ = m.groups()
    pre_key: tuple = (1,) if pre is None else (0, *((0, int(p), "") if p.isdigit() else (1, 0, p)
                                                   for p in pre.split(".")))
    return (int(major), int(minor), int(patch), pre_key)


def _semver(text: str) -> str:
    semver_key(text)
    return text


def _is_semver(text: str) -> bool:
    return _SEMVER.match(text) is not None


def _compare_semver(a: str, b: str) -> int:
    ka, kb = semver_key(a), semver_key(b)
    return (ka > kb) - (ka < kb)


def _part(i: int):
    return lambda text: int(_SEMVER.match(text).group(i + 1)) if _SEMVER.match(text) else _bad_semver(text)


def _bad_semver(text: str) -> int:
    raise ValueError(f"invalid semantic version {text!r}")


def _overload(name: str, ret, params, impl, member: bool = False) -> cel.Overload:
    sig = "_".join(p.name() for p in params)
    return cel.Overload(f"{name}_{'member_' if member else ''}{sig}", ret, params, is_member=member, impl=impl)


def _functions() -> list:
    q, s, i, b, d = T.INT, T.STRING, T.INT, T.BOOL, T.DOUBLE
    return [
        cel.FunctionDecl("quantity", [_overload("quantity", q, [s], _quantity)]),
        cel.FunctionDecl("isQuantity", [_overload("isQuantity", b, [s], _is_quantity)]),
        cel.FunctionDecl("semver", [_overload("semver", s, [s], _semver)]),
        cel.FunctionDecl("isSemver", [_overload("isSemver", b, [s], _is_semver)]),
        cel.FunctionDecl("compareTo", [_overload("compareTo", i, [q, q], _compare_int, True),
                                       _overload("compareTo", i, [s, s], _compare_semver, True)]),
        cel.FunctionDecl("isGreaterThan", [_overload("isGreaterThan", b, [q, q], lambda a, c: a > c, True),
                                           _overload("isGreaterThan", b, [s, s],
                                                     lambda a, c: _compare_semver(a, c) > 0, True)]),
        cel.FunctionDecl("isLessThan", [_overload("isLessThan", b, [q, q], lambda a, c: a < c, True),
                                        _overload("isLessThan", b, [s, s],
                                                  lambda a, c: _compare_semver(a, c) < 0, True)]),
        cel.FunctionDecl("add", [_overload("add", q, [q, q], lambda a, c: a + c, True)]),
        cel.FunctionDecl("sub", [_overload("sub", q, [q, q], lambda a, c: a - c, True)]),
        cel.FunctionDecl("asInteger", [_overload("asInteger", i, [q], _as_integer, True)]),
        cel.FunctionDecl("asApproximateFloat", [_overload("asApproximateFloat", d, [q], lambda a: a / MILLI, True)]),
        cel.FunctionDecl("isInteger", [_overload("isInteger", b, [q], lambda a: a % MILLI == 0, True)]),
        cel.FunctionDecl("sign", [_overload("sign", i, [q], lambda a: (a > 0) - (a < 0), True)]),
        cel.FunctionDecl("major", [_overload("major", i, [s], _part(0), True)]),
        cel.FunctionDecl("minor", [_overload("minor", i, [s], _part(1), True)]),
        cel.FunctionDecl("patch", [_overload("patch", i, [s], _part(2), True)]),
    ]


@lru_cache(maxsize=1)
def _env() -> Any:
    return cel.NewEnv(variables={"device": T.DYN}, extensions=[ExtBindings()], functions=_functions())


# --- devices as CEL reads them ------------------------------------------------------------

@dataclass(frozen=True)
class CelDevice:
    """A device's `device` variable, built once per device: attributes and capacity by domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, int]]


def cel_device(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, int]) -> CelDevice:
    """`attributes`: qualified name -> int, bool, str or Version; `capacity`: qualified name ->
    thousandths. A name without a domain is under the driver (kube's parseQualifiedName)."""
    attrs: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        domain, _, ident = name.rpartition("/") if "/" in name else (driver, "", name)
        attrs.setdefault(domain, {})[ident] = value.text if isinstance(value, Version) else value
    caps: dict[str, dict[str, int]] = {}
    for name, value in capacity.items():
        domain, _, ident = name.rpartition("/") if "/" in name else (driver, "", name)
        caps.setdefault(domain, {})[ident] = value
    return CelDevice(driver, attrs, caps)


@dataclass(frozen=True)
class Version:
    """A version attribute's value (`version: 1.2.3`): semver text, matched exactly by
    matchAttribute and compared by precedence in CEL."""

    text: str


@dataclass(frozen=True)
class Selector:
    """One compiled selector expression. `literals`: its string literals, which a lookup of a
    domain the device lacks may use (each padded with an empty map: kube's default)."""

    expression: str
    program: Any
    literals: tuple[str, ...]

    def matches(self, device: CelDevice) -> bool:
        attrs, caps = device.attributes, device.capacity
        if self.literals:
            missing = [lit for lit in self.literals if lit not in attrs or lit not in caps]
            if missing:
                attrs = {**{lit: {} for lit in missing}, **attrs}
                caps = {**{lit: {} for lit in missing}, **caps}
        try:
            value = self.program.eval(data={"device": {"driver": device.driver, "attributes": attrs,
                                                       "capacity": caps}})
            result = value.value()
        except Exception as err:   # the runtime's errors are plain RuntimeErrors of cel-cpp's status
            raise CelError(f"CEL runtime error: {_clean(str(err))}") from None
        if value.type() == T.ERROR or not isinstance(result, bool):
            raise CelError(f"CEL runtime error: {_clean(str(result))}" if value.type() == T.ERROR else
                           f"CEL result of type {value.type().name()} could not be converted to bool")
        return result


def _clean(message: str) -> str:
    return " ".join(message.split())


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """The expression compiled once (cached by its text); raises CelError naming the problem."""
    try:
        program = _env().compile(expression)
    except Exception as err:   # cel-cpp reports a bad expression as a RuntimeError with its position
        raise CelError(f"CEL compile error: {_clean(str(err))}") from None
    literals = tuple(dict.fromkeys(a or b for a, b in _STRING_LITERAL.findall(expression) if (a or b)))
    return Selector(expression, program, literals)
