"""The URN pins (offline/urns.py): a render whose resources' identities differ from the committed pins fails, and a
resource that moves needs a pulumi.Alias before its pin may change."""

from __future__ import annotations

import pytest

from offline import urns
from tests.helpers import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_the_render_keeps_every_pinned_urn(stack, render_of):
    pinned = urns.parse(urns.pin_path(stack).read_text())
    rendered = urns.pins_of(render_of(stack).resources)
    moves = urns.unaliased_moves(pinned, rendered)
    assert rendered == pinned, "\n".join(
        [f"stack {stack}: resource identities changed (a changed type token, name or parent replaces a deployed "
         "resource unless it has a pulumi.Alias); if intended, run `python -m offline urns` and commit the pins:",
         *urns.difference(pinned, rendered), *moves])


def pin(line: str) -> dict[str, urns.Pin]:
    return urns.parse(line + "\n")


def test_a_renamed_component_token_is_a_move_that_needs_an_alias():
    old = pin("aksgpu:aks:Cluster$azure-native:containerservice:ManagedCluster::aks")
    new = pin("aksgpu:azure:Cluster$azure-native:containerservice:ManagedCluster::aks")
    assert urns.unaliased_moves(old, new) == [
        "aksgpu:aks:Cluster$azure-native:containerservice:ManagedCluster::aks is now "
        "aksgpu:azure:Cluster$azure-native:containerservice:ManagedCluster::aks: add pulumi.Alias(...) resolving to "
        "the old URN to its options, or deployed stacks replace it"]


def test_a_move_with_an_alias_to_its_old_urn_is_allowed():
    old = pin("aksgpu:azure:Registry$azure-native:authorization:RoleAssignment::registry-acrpull")
    new = pin("aksgpu:aks:Cluster$azure-native:authorization:RoleAssignment::registry-acrpull <- "
              "aksgpu:azure:Registry$azure-native:authorization:RoleAssignment::registry-acrpull")
    assert urns.unaliased_moves(old, new) == []


def test_a_renamed_resource_under_the_same_parent_and_type_is_a_new_resource_not_a_move():
    """A new name is a new resource (a pool renamed in config): the pin changes, deliberately, with no alias."""
    old = pin("aksgpu:aks:GpuNodePool$azure-native:containerservice:AgentPool::gpu-t4")
    new = pin("aksgpu:aks:GpuNodePool$azure-native:containerservice:AgentPool::gpu-a10")
    assert urns.unaliased_moves(old, new) == []
    assert urns.difference(old, new) == [f"- {next(iter(old))}", f"+ {next(iter(new))}"]


def test_pins_round_trip_through_their_text():
    pins = pin("a:b:C::x <- a:b:D::x <- a:b:E::x") | pin("a:b:C::y")
    assert urns.parse(urns.text(pins)) == pins


def test_the_writer_refuses_a_planted_rename_and_keeps_the_old_pin(tmp_path, monkeypatch):
    """The planted fault: the smoke test's token changed in code, no alias. The render differs from the pin, and the
    writer refuses to rewrite it."""
    import pulumi

    from offline.render import render_stack

    pinned = urns.pins_of(render_stack("gpu-basics").resources)
    (tmp_path / "gpu-basics.txt").write_text(urns.text(pinned))
    register = pulumi.ComponentResource.__init__

    def renamed(self, t, name, props=None, opts=None, remote=False, package_ref=None):
        t = "aksgpu:renamed:GpuSmokeTest" if t == "aksgpu:gpu:GpuSmokeTest" else t
        register(self, t, name, props, opts, remote, package_ref)

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", renamed)
    written, refused = urns.write_pins(["gpu-basics"], tmp_path)
    assert written == [] and refused
    assert all("is now aksgpu:renamed:GpuSmokeTest" in r for r in refused), refused
    assert urns.parse((tmp_path / "gpu-basics.txt").read_text()) == pinned
