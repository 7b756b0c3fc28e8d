"""The S3 bucket of stored values too large for the log (`Settings.bucket`): what `dormant dev` creates next to the
table and the queues, configured as template.yaml and infra/ deploy it (tests/deploy checks they say the same).

Object keys: `actors/<hash of the actor id>/...` for values the log references (Dormant deletes them itself, with
the commits that release them or the actor; orphans are swept by listing the actor's prefix, so no rule may
expire `actors/`), and `ephemeral/<hash>/...` for responses and broadcast events, whose DynamoDB items live
`response_ttl_seconds` / `event_ttl_seconds` (a day by default): a lifecycle rule expires those after two days.
Another one aborts multipart uploads left incomplete for a day.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError  # type: ignore[import-untyped]

from dormant.s3.large_values import EPHEMERAL

DEV_BUCKET = "dormant-dev-values"
"""The bucket `dormant dev` uses when DORMANT_BUCKET is not set."""
EPHEMERAL_PREFIX = EPHEMERAL  # dormant.s3.large_values: responses, events, big API responses
EPHEMERAL_EXPIRY_DAYS = 2
ABORT_INCOMPLETE_UPLOAD_DAYS = 1
_MISSING = frozenset({"404", "NoSuchBucket", "NotFound"})


class BucketError(RuntimeError):
    """The bucket cannot be used (another account owns the name, or it cannot be created)."""


def lifecycle_rules() -> list[dict[str, Any]]:
    """The bucket's lifecycle rules, as S3's PutBucketLifecycleConfiguration takes them."""
    return [
        {"ID": "expire-ephemeral-values", "Status": "Enabled", "Filter": {"Prefix": EPHEMERAL_PREFIX},
         "Expiration": {"Days": EPHEMERAL_EXPIRY_DAYS}},
        {"ID": "abort-incomplete-multipart-uploads", "Status": "Enabled", "Filter": {"Prefix": ""},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_INCOMPLETE_UPLOAD_DAYS}},
    ]


async def create_bucket(client: Any, name: str, region: str) -> bool:
    """Create the bucket if it is missing (True when this call created it): public access blocked, encrypted with
    S3-managed keys, with `lifecycle_rules()`. A bucket of the account that exists already is used as it is."""
    try:
        await client.head_bucket(Bucket=name)
        return False
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in ("403", "AccessDenied", "Forbidden"):
            raise BucketError(f"the S3 bucket {name!r} exists but this account may not use it (bucket names are "
                              "global): set DORMANT_BUCKET to a name of your own") from None
        if code not in _MISSING:
            raise
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        await client.create_bucket(Bucket=name, **location)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code == "BucketAlreadyOwnedByYou":  # created meanwhile (another dormant dev): use it as it is
            return False
        if code == "BucketAlreadyExists":
            raise BucketError(f"the S3 bucket name {name!r} is taken by another account: set DORMANT_BUCKET to a "
                              "name of your own") from None
        raise
    await client.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    await client.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    await client.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": lifecycle_rules()})
    return True
