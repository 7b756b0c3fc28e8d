"""Values too big for an item, kept in S3 (the claim check): the JSON transform, the bucket, and when objects are
deleted (dormant.s3.large_values)."""
