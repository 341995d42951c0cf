"""Static blob volumes: access modes, unique handles, identity auth without secrets, SAS in a Secret."""

import datetime as dt
import json

import pytest

from components.volumes.blob_volume import sas_expiry, volume_handle
from offline.render import SECRET
from tests.helpers import render_with

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def volumes(render):
    return {v.inputs["spec"]["claimRef"]["name"]: v.inputs for v in render.of_type(PV)}


def test_input_is_read_only_many_and_output_read_write_many(render_of):
    pv = volumes(render_of("av-resim"))
    assert pv["input"]["spec"]["accessModes"] == ["ReadOnlyMany"] and pv["input"]["spec"]["csi"]["readOnly"] is True
    assert pv["output"]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pv["output"]["spec"]["csi"]["readOnly"] is False


@pytest.mark.parametrize("stack", ["av-resim", "training-autoscale"])
def test_volumes_use_blobfuse2_with_unique_handles_and_retain_data(render_of, stack):
    pvs = volumes(render_of(stack)).values()
    handles = [p["spec"]["csi"]["volumeHandle"] for p in pvs]
    assert len(handles) == len(set(handles))
    for p in pvs:
        csi = p["spec"]["csi"]
        assert csi["driver"] == "blob.csi.azure.com" and csi["volumeAttributes"]["protocol"] == "fuse2"
        assert "#" not in csi["volumeHandle"] and "/" not in csi["volumeHandle"]
        assert p["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_each_claim_binds_its_own_volume_in_the_workload_namespace(render_of):
    r = render_of("av-resim")
    for claim in r.of_type(PVC):
        spec, meta = claim.inputs["spec"], claim.inputs["metadata"]
        assert meta["namespace"] == "av-resim"
        (pv,) = [v for v in r.of_type(PV) if v.inputs["metadata"]["name"] == spec["volumeName"]]
        assert pv.inputs["spec"]["claimRef"] == {"namespace": "av-resim", "name": meta["name"]}
        assert pv.name in claim.depends_on


def test_identity_mode_mounts_with_the_kubelet_identity_and_no_secret_anywhere(render_of):
    r = render_of("av-resim")
    for pv in volumes(r).values():
        attrs = pv["spec"]["csi"]["volumeAttributes"]
        assert attrs["AzureStorageAuthType"] == "MSI" and attrs["AzureStorageIdentityClientID"]
        assert "nodeStageSecretRef" not in pv["spec"]["csi"]
    assert not r.of_type("kubernetes:core/v1:Secret")
    assert "sig=" not in json.dumps([x.as_json() for x in r.resources])


def test_volumes_wait_for_the_csi_driver_and_the_data_role(render_of):
    # On the PV itself: children do not inherit a component's dependsOn.
    pv = render_of("training-autoscale").named("volume-checkpoints-pv")
    assert {"blob-csi-release", "storage-ckpt-data-contributor-0"} <= set(pv.depends_on)


def test_sas_mode_keeps_the_token_in_a_secret_never_in_helm_values(tmp_path):
    r = render_with(scenario="av-resim",
                   storage={"auth": "sas", "sasExpiryDays": 3,
                            "accounts": [{"role": "input"}, {"role": "output"}]})
    secrets = r.of_type("kubernetes:core/v1:Secret")
    assert len(secrets) == 2
    for s in secrets:
        assert s.inputs["stringData"] == SECRET and s.inputs["type"] == "Opaque"
    for pv in volumes(r).values():
        ref = pv["spec"]["csi"]["nodeStageSecretRef"]
        assert ref["namespace"] == "av-resim" and ref["name"].endswith("-sas")
    for rel in r.of_type("kubernetes:helm.sh/v3:Release"):
        assert "sas" not in json.dumps(rel.inputs["values"]).lower()
    accounts = [a for a in r.of_type("azure-native:storage:StorageAccount") if not a.name.startswith("build-")]
    assert len(accounts) == 2
    assert all(a.inputs["sasPolicy"]["sasExpirationPeriod"] == "3.00:00:00" for a in accounts)
    assert all(a.inputs["allowSharedKeyAccess"] is True for a in accounts)


def test_sas_expiry_is_midnight_utc_n_days_ahead():
    assert sas_expiry(7, today=dt.date(2026, 11, 22)) == "2026-11-29T00:00:00Z"


def test_volume_handle_is_account_and_container():
    assert volume_handle("stdata1234", "input") == "stdata1234_input"
