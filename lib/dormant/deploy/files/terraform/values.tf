# -- large values: a stored value (state, step result, message body, response, event) whose JSON is over the offload
# threshold (32 KiB) is kept in this bucket, the table's items hold a reference. Keys `actors/<hash>/...` are values the
# log references: Dormant deletes them itself (with the commits that release them, or the actor) and sweeps an
# actor's orphans by listing its prefix, so no rule expires them. Keys `ephemeral/<hash>/...` are responses and
# broadcast events, whose items live a day (response_ttl_seconds, event_ttl_seconds): expired after 2 days.
# Like the table, prevent_destroy keeps it (rather than versioning: Dormant writes each key once and deletes what it
# released; versions would keep all of that). Encrypted with S3-managed keys (SSE-S3: no KMS request per value and
# no key policy; ../docs/deploy.md), private, TLS only. The name: var.value_bucket_name, or one Terraform makes
# unique (bucket names are global), as template.yaml leaves it to CloudFormation.
resource "aws_s3_bucket" "values" {
  #checkov:skip=CKV_AWS_18:Server access logs need a second bucket; audit object access with CloudTrail data events if needed
  #checkov:skip=CKV_AWS_21:Retained with the stack instead; each key is written once and versions would keep deleted values
  #checkov:skip=CKV_AWS_144:One region, as the table and queues; Dormant reads its values where it writes them
  #checkov:skip=CKV_AWS_145:Encrypted with S3-managed keys (SSE-S3); a KMS key would add a request per value (docs/deploy.md)
  #checkov:skip=CKV2_AWS_62:Nothing consumes object events; Dormant's own commits reference the values
  bucket = var.value_bucket_name != "" ? var.value_bucket_name : null
  tags   = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "values" {
  bucket = aws_s3_bucket.values.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "values" {
  bucket                  = aws_s3_bucket.values.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "values" {
  bucket = aws_s3_bucket.values.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

# dormant.dev.bucket.lifecycle_rules (what `dormant dev` sets up) says the same
resource "aws_s3_bucket_lifecycle_configuration" "values" {
  bucket = aws_s3_bucket.values.id

  rule {
    id     = "expire-ephemeral-values"
    status = "Enabled"

    filter {
      prefix = "ephemeral/"
    }

    expiration {
      days = 2
    }
  }

  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"

    filter {
      prefix = ""
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# Requests without TLS are refused.
resource "aws_s3_bucket_policy" "values" {
  bucket = aws_s3_bucket.values.id
  policy = data.aws_iam_policy_document.values_tls_only.json

  # S3 refuses a policy while the public access block is being set
  depends_on = [aws_s3_bucket_public_access_block.values]
}

data "aws_iam_policy_document" "values_tls_only" {
  statement {
    sid       = "TlsOnly"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.values.arn, "${aws_s3_bucket.values.arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}
