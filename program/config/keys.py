"""The namespace of every config key: the Pulumi project's name (``Pulumi.yaml``), which is also the first part of
every URN, so it never changes."""

PROJECT = "aksgpu"
"""The Pulumi project name, and the namespace of every config key."""
KEY_PREFIX = f"{PROJECT}:"
"""What every key of a stack file starts with: ``aksgpu:gpuPools``."""
SECRET = "[secret]"  # noqa: S105 (a placeholder, not a secret)
"""What an encrypted value (``key: {secure: ...}``) reads as where only its being a secret matters: the offline
render cannot decrypt it, and the checks need to know only that it is not plain text."""
