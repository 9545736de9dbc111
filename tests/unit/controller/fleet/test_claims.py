from controller.fleet.claims import build_claim, memory_selector, read_claim
from placement import GiB, NewClaim

DECISION = NewClaim(node="node-0", devices=2, memory_floor=30 * GiB, memory_ceiling=80 * GiB)


def claim() -> dict:
    return build_claim("orw-u1", DECISION, namespace="openrl", device_class="gpu.example.com",
                       driver="gpu.example.com", worker="w1")


def test_claim_shape() -> None:
    body = claim()
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert body["metadata"]["labels"] == {
        "openrl.io/managed": "true", "openrl.io/devices": "2",
        "openrl.io/memory-floor": "30Gi", "openrl.io/memory-ceiling": "80Gi",
        "openrl.io/sized-for-node": "node-0"}
    assert body["metadata"]["annotations"]["openrl.io/sized-for-node"] == "node-0"
    assert "ownerReferences" not in body["metadata"]
    (request,) = body["spec"]["devices"]["requests"]
    assert request["name"] == "gpu"
    exactly = request["exactly"]
    assert exactly["deviceClassName"] == "gpu.example.com"
    assert exactly["allocationMode"] == "ExactCount"
    assert exactly["count"] == 2
    assert exactly["selectors"] == [{"cel": {"expression": (
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("30Gi")) >= 0 && '
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) <= 0')}}]


def test_selector_uses_the_driver_domain_and_exact_quantities() -> None:
    expr = memory_selector("nvidia.com", 7680 << 20, 24 * GiB)
    assert 'device.capacity["nvidia.com"]' in expr
    assert 'quantity("7680Mi")' in expr and 'quantity("24Gi")' in expr


def test_unallocated_claim_reserves_its_sized_for_node() -> None:
    view = read_claim(claim(), {})
    assert (view.node, view.devices, view.allocated) == ("node-0", 2, False)


def test_allocated_claim_reads_node_from_selector_and_width_from_results() -> None:
    body = claim()
    body["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "pool": "p", "device": "gpu-3"},
                                {"request": "gpu", "pool": "p", "device": "gpu-4"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}]},
    }, "reservedFor": [{"resource": "pods", "name": "p", "uid": "x"}]}
    view = read_claim(body, {})
    assert (view.node, view.devices, view.allocated, view.reserved) == ("node-7", 2, True, True)


def test_allocation_without_selector_falls_back_to_pool_node() -> None:
    body = claim()
    body["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "pool": "pool-a", "device": "gpu-0"}]}}}
    view = read_claim(body, {"pool-a": "node-9"})
    assert (view.node, view.devices, view.allocated) == ("node-9", 1, True)
    unknown = read_claim(body, {})
    assert (unknown.node, unknown.allocated) == ("node-0", False)
