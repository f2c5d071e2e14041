"""DRA's CEL device selectors (runtime.cluster.dracel), against kube's DRA CEL environment
(k8s.io/dynamic-resource-allocation/cel compile_test.go: TestCompile's cases, translated)."""

import pytest

from runtime.cluster.dracel import CelError, Version, cel_device, compile_selector, quantity_milli, semver_key

DRIVER = "dra.example.com"
DEVICE = cel_device(DRIVER, {"name": "gpu-1", "model": "LATEST-GPU-MODEL", "count": 8, "healthy": True,
                             "driverVersion": Version("1.2.3"), "other.example.com/family": "ampere"},
                    {"memory": quantity_milli("80Gi"), "cores": quantity_milli("500m")})


@pytest.mark.parametrize("expression, expected", [
    # TestCompile: "true", "driver_name", "domain", "quantity", "check-positive", "semver", "bindings"
    ("true", True),
    ('device.driver == "dra.example.com"', True),
    ('device.driver == "other.example.com"', False),
    ('device.attributes["dra.example.com"].model == "LATEST-GPU-MODEL"', True),
    ('device.attributes["other.example.com"].family == "ampere"', True),
    ('device.capacity["dra.example.com"].memory.compareTo(quantity("10Gi")) >= 0', True),
    ('device.capacity["dra.example.com"].memory.isLessThan(quantity("10Gi"))', False),
    ('device.capacity["dra.example.com"].cores == quantity("0.5")', True),
    ('device.capacity["dra.example.com"].cores.isInteger()', False),
    ('device.attributes["dra.example.com"].count in [4, 8] && device.attributes["dra.example.com"].healthy', True),
    ('device.attributes["dra.example.com"].driverVersion.isGreaterThan(semver("1.2.3-rc.1"))', True),
    ('device.attributes["dra.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0', True),
    ('cel.bind(dra, device.attributes["dra.example.com"], dra.model.startsWith("LATEST") && dra.count == 8)', True),
    # "domain without attributes": an unknown domain is an empty map, not an error
    ('"model" in device.attributes["unknown.example.com"]', False),
    ('device.capacity["unknown.example.com"].size() == 0', True),
])
def test_selector_matches(expression, expected):
    assert compile_selector(expression).matches(DEVICE) is expected


def test_each_expression_is_compiled_once():
    assert compile_selector('device.driver == "x"') is compile_selector('device.driver == "x"')


@pytest.mark.parametrize("expression, words", [
    ("device.driver ==", "CEL compile error"),
    ('device.attributes["dra.example.com"].nosuch == 1', "CEL runtime error"),   # TestCompile "missing attribute"
    ("1 + 1", "could not be converted to bool"),
    ('quantity("bad") == quantity("1")', "CEL runtime error"),
])
def test_errors_name_their_kind(expression, words):
    with pytest.raises(CelError, match=words):
        compile_selector(expression).matches(DEVICE)


def test_semver_precedence():
    order = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
             "1.0.0-rc.1", "1.0.0", "2.0.0", "2.1.0", "2.1.1"]   # semver.org §11's example
    assert sorted(order, key=semver_key) == order
