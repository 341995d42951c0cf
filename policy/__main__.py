"""`pulumi preview --policy-pack policy` runs this: the pack, every policy mandatory (pack.py)."""

from pulumi_policy import PolicyPack

from pack import ENFORCEMENT, PACK_NAME, policies

PolicyPack(PACK_NAME, policies(), enforcement_level=ENFORCEMENT)
