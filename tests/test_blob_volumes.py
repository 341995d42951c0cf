"""Static blob volumes: access modes, unique handles, identity auth without secrets, SAS in a Secret."""

import datetime as dt
import json

import pulumi
import pytest

from components.azure.storage import sas_expiry
from components.volumes.blob_volume import settings_hash, volume_handle
from offline.mocks import azure_id, guid
from offline.render import SECRET
from tests.helpers import render_with, shape

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def volumes(render):
    """PersistentVolumes by ``<container>-<workload>`` (the label every generation of that volume carries)."""
    return {v.inputs["metadata"]["labels"]["aksgpu/volume"]: v.inputs for v in render.of_type(PV)}


@pytest.mark.parametrize("stack, read_only, read_write", [
    ("av-resim", ["input-resim"], ["output-resim"]),
    ("training-autoscale", ["checkpoints-predict"], ["checkpoints-train"]),
])
def test_a_workload_that_only_reads_gets_a_read_only_volume(render_of, stack, read_only, read_write):
    pv = volumes(render_of(stack))
    assert sorted(pv) == sorted(read_only + read_write)
    for name in read_only:
        assert pv[name]["spec"]["accessModes"] == ["ReadOnlyMany"] and pv[name]["spec"]["csi"]["readOnly"] is True
    for name in read_write:
        assert pv[name]["spec"]["accessModes"] == ["ReadWriteMany"] and pv[name]["spec"]["csi"]["readOnly"] is False


def test_volumes_use_blobfuse2_with_unique_handles_and_retain_data(render_shape):
    pvs = volumes(render_shape("private-two-pools")).values()
    handles = [p["spec"]["csi"]["volumeHandle"] for p in pvs]
    assert len(handles) == len(set(handles))
    for p in pvs:
        csi = p["spec"]["csi"]
        assert csi["driver"] == "blob.csi.azure.com" and csi["volumeAttributes"]["protocol"] == "fuse2"
        assert "#" not in csi["volumeHandle"] and "/" not in csi["volumeHandle"]
        assert p["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_each_claim_binds_its_own_volume_in_the_workload_namespace(render_shape):
    r = render_shape("private-two-pools")
    for claim in r.of_type(PVC):
        spec, meta = claim.inputs["spec"], claim.inputs["metadata"]
        assert meta["namespace"] == "av-resim"
        (pv,) = [v for v in r.of_type(PV) if v.inputs["metadata"]["name"] == spec["volumeName"]]
        assert pv.inputs["spec"]["claimRef"] == {"namespace": "av-resim", "name": meta["name"]}
        assert pv.name in claim.depends_on


def test_identity_mode_mounts_with_a_workload_identity_token_and_no_secret_anywhere(render_shape):
    r = render_shape("training")
    for name, pv in volumes(r).items():
        workload = name.rsplit("-", 1)[1]
        attrs = pv["spec"]["csi"]["volumeAttributes"]
        identity = r.named(f"identity-{workload}-identity")
        assert attrs["clientID"] == guid(azure_id(identity.type, identity.name, identity.inputs), "client")
        # Token-only mode: with clientID alone the driver would fetch the account key, which the account refuses.
        assert attrs["mountWithWorkloadIdentityToken"] == "true"
        # A leftover MSI auth type would reach blobfuse2 beside the token (the kubelet identity, silently).
        assert not {"AzureStorageAuthType", "AzureStorageIdentityClientID"} & set(attrs)
        assert "nodeStageSecretRef" not in pv["spec"]["csi"]
    assert not r.of_type("kubernetes:core/v1:Secret")
    assert "sig=" not in json.dumps([x.as_json() for x in r.resources])


def test_volumes_wait_for_the_csi_driver_and_the_workloads_data_role(render_shape):
    # On the PV itself: children do not inherit a component's dependsOn.
    pv = render_shape("training").named("volume-train-checkpoints-pv")
    assert {"blob-csi-release", "identity-train-checkpoints-data", "storage-ckpt-checkpoints"} <= set(pv.depends_on)


def test_sas_mode_keeps_the_token_in_a_secret_never_in_helm_values():
    r = render_with(scenario="av-resim",
                   storage={"auth": "sas", "sasExpiryDays": 3,
                            "accounts": [{"role": "input"}, {"role": "output"}]})
    secrets = r.of_type("kubernetes:core/v1:Secret")
    assert len(secrets) == 2  # the shards' input and output volumes
    identities = r.of_type("azure-native:managedidentity:UserAssignedIdentity")
    assert identities == []  # none for data (and av-resim scales nothing, so none for KEDA)
    for s in secrets:
        # `data`: a renewed token updates the Secret in place (`stringData` would replace it).
        assert s.inputs["data"] == {"azurestorageaccountname": SECRET, "azurestorageaccountsastoken": SECRET}
        assert s.inputs["type"] == "Opaque" and "stringData" not in s.inputs
        assert set(s.revealed["data"]) == {"azurestorageaccountname", "azurestorageaccountsastoken"}
    for pv in volumes(r).values():
        ref = pv["spec"]["csi"]["nodeStageSecretRef"]
        assert ref["namespace"] == "av-resim" and ref["name"].endswith("-sas")
    for rel in r.of_type("kubernetes:helm.sh/v3:Release"):
        assert "sas" not in json.dumps(rel.inputs["values"]).lower()
    accounts = [a for a in r.of_type("azure-native:storage:StorageAccount") if not a.name.startswith("build-")]
    assert len(accounts) == 2
    assert all(a.inputs["sasPolicy"]["sasExpirationPeriod"] == "3.00:00:00" for a in accounts)
    assert all(a.inputs["allowSharedKeyAccess"] is True for a in accounts)


def test_the_sas_is_asked_for_only_once_the_storage_account_exists():
    """Round-4 Azure audit #12: an invoke waits for resources only through InvokeOutputOptions.depends_on (Pulumi
    SDK >= 3.146, "Provider functions"); with a plain account name the first `pulumi up` asked before the account."""
    from unittest import mock

    from components.volumes import blob_volume
    seen = []
    original = blob_volume.storage.list_storage_account_service_sas_output

    def record(**kwargs):
        seen.append(kwargs["opts"])
        return original(**kwargs)
    with mock.patch.object(blob_volume.storage, "list_storage_account_service_sas_output", record):
        render_with(scenario="av-resim", storage={"auth": "sas", "accounts": [{"role": "input"}, {"role": "output"}]})
    assert seen and all(isinstance(o, pulumi.InvokeOutputOptions) for o in seen)
    assert all(any(getattr(d, "_name", "").startswith("storage-") for d in o.depends_on) for o in seen)


def test_sas_expiry_is_midnight_utc_n_days_ahead():
    assert sas_expiry(7, today=dt.date(2026, 11, 22)) == "2026-11-29T00:00:00Z"


def test_volume_handle_is_account_container_and_settings():
    assert volume_handle("stdata1234", "input", "0a1b2c3d") == "stdata1234_input_0a1b2c3d"


def test_any_mount_setting_changes_the_hash():
    base = ("stdata1234", "input", True, "identity")
    assert settings_hash(*base) == settings_hash(*base)
    for changed in (("stother", "input", True, "identity"), ("stdata1234", "input", False, "identity"),
                    ("stdata1234", "input", True, "sas")):
        assert settings_hash(*changed) != settings_hash(*base)


def test_changing_how_a_volume_mounts_makes_a_new_volume_and_claim_that_the_workloads_follow(render_shape):
    identity = render_shape("private-two-pools")
    config = shape("private-two-pools")
    sas = render_with("av-resim", **{**config, "storage": {**config["storage"], "auth": "sas"}})
    for r in (identity, sas):
        claims = {c.inputs["metadata"]["name"] for c in r.of_type(PVC)}
        mounted = {v["persistentVolumeClaim"]["claimName"]
                   for t in r.of_type("kubernetes:batch/v1:CronJob")
                   for v in t.revealed["spec"]["jobTemplate"]["spec"]["template"]["spec"].get("volumes", [])
                   if "persistentVolumeClaim" in v}
        assert mounted and mounted <= claims
    pv_names = lambda r: {v.inputs["metadata"]["name"] for v in r.of_type(PV)}  # noqa: E731
    assert not pv_names(identity) & pv_names(sas)  # a new generation, never an in-place replacement


def _sas_volume_in(preview: bool) -> tuple[list[str], bool]:
    """The invokes a SAS-mode BlobVolume makes, and whether its Secret's token is known, in a preview or a deploy."""
    import contextvars

    from pulumi.runtime import mocks as pulumi_mocks
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    from components.vocabulary import StorageAuth
    from components.volumes.blob_volume import BlobVolume, BlobVolumeArgs
    from offline.mocks import AzureMocks

    def run() -> tuple[list[str], bool]:
        mocks = AzureMocks("t")
        pulumi_mocks.set_mocks(mocks, project="aksgpu", stack="t", preview=preview)
        holder = {}

        def program():
            holder["volume"] = BlobVolume("volume", BlobVolumeArgs(
                account_name="stdata1234", container="input", resource_group_name="rg-t", namespace="ns",
                claim_name="input", auth=StorageAuth.SAS))

        _sync_await(run_pulumi_func(program))
        secret = next(c for c in holder["volume"]._childResources if c._name == "volume-sas")
        return sorted(mocks.invokes), _sync_await(secret.data.is_known())
    return contextvars.Context().run(run)


def test_a_preview_never_asks_azure_for_a_sas():
    """Issue 33b audit #6: listServiceSas is a POST action (Microsoft.Storage/storageAccounts/listServiceSas/action)
    that a preview's identity, Reader (`*/read`), may not perform; once the invoke waited for the account, it ran in
    every preview of an existing SAS stack and failed it. A preview leaves the token unknown; `pulumi up` asks."""
    assert _sas_volume_in(preview=True) == ([], False)
    invokes, known = _sas_volume_in(preview=False)
    assert invokes == ["azure-native:storage:listStorageAccountServiceSAS"] and known
