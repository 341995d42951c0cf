"""Blob storage inside the cluster: the Blob CSI driver and static volumes for blob containers."""
