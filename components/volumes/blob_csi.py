"""The open-source Azure Blob CSI driver (Helm), with blobfuse2 installed on hosts through its proxy."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.kubernetes import charts, helm


def blob_csi_values() -> dict:
    return {
        "node": {
            "enableBlobfuseProxy": True,
            "blobfuseProxy": {"installBlobfuse2": True, "blobfuse2Version": charts.BLOBFUSE2_VERSION},
        },
        # The controller runs with hostNetwork on a fixed port, so two replicas never share a node: the chart's
        # default of 2 forces a second system node (that the autoscaler then keeps), or never becomes ready.
        # It only provisions dynamic volumes; these are static, so one replica is plenty.
        "controller": {"replicas": 1},
    }


@dataclass(frozen=True)
class BlobCsiDriverArgs:
    namespace: str = "kube-system"
    """Where the controller and node plugin run: kube-system exists on every cluster, and the chart expects it."""


class BlobCsiDriver(pulumi.ComponentResource):
    release: pulumi.CustomResource

    def __init__(self, name: str, args: BlobCsiDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aksgpu:storage:BlobCsiDriver", name, None, opts)  # frozen: components/__init__.py
        self.release = helm.release(f"{name}-release", "blob-csi-driver", charts.BLOB_CSI, args.namespace,
                                    blob_csi_values(), self)
        self.register_outputs({"release": self.release.id})
