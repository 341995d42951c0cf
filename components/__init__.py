"""Pulumi ``ComponentResource``s, one concern per folder, and the Kubernetes helpers they share."""
