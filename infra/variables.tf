variable "name" {
  description = "Name of the deployment; resources are named \"<name>-<stage>-<role>\" (as template.yaml names them with the stack name)."
  type        = string
  default     = "dormant"

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9-]{0,39}$", var.name))
    error_message = "name: letters, digits and dashes, at most 40 characters (queue names are limited to 80)."
  }
}

variable "stage" {
  description = "Deployment stage (dev, staging, prod...): part of every resource name and tagged on all."
  type        = string
  default     = "dev"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,15}$", var.stage))
    error_message = "stage: lowercase letters, digits and dashes, at most 16 characters."
  }
}

variable "app" {
  description = "DORMANT_APP: the registry the functions serve, as module:attribute; its package is bundled by `make infra-zips APP_DIR=...`."
  type        = string
  default     = "examples.app:registry"

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$", var.app))
    error_message = "app must be module:attribute, e.g. myapp.actors:registry."
  }
}

variable "code_zip" {
  description = "The functions' bundle (lib/dormant, functions/, the registry's package), built by `make infra-zips`. Default: .build/code.zip here."
  type        = string
  default     = null
}

variable "layer_zip" {
  description = "The dependencies layer (python3.13 on arm64), built by `make infra-zips` from `make lambda-layer`. Default: .build/layer.zip here."
  type        = string
  default     = null
}

# -- who may call (../docs/deploy.md, "Authentication") --------------------------------------------------------
variable "auth_mode" {
  description = "How API Gateway authenticates callers of every route, the operator routes too, but the callback routes, whose token is their authorization (DORMANT_AUTH_MODE): iam (SigV4), jwt (jwt_issuer, jwt_audience) or none (anyone: demos only)."
  type        = string
  default     = "iam"

  validation {
    condition     = contains(["iam", "jwt", "none"], var.auth_mode)
    error_message = "auth_mode must be iam, jwt or none."
  }
}

variable "public_url" {
  description = "Where callers reach the API (DORMANT_PUBLIC_URL), e.g. a custom domain: the base of callback URLs (cb.url, POST /callbacks/{token}). Empty: the HTTP API's own execute-api URL."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(https?://[^\\s?#]+)?$", var.public_url))
    error_message = "public_url must be empty or an http(s) URL without spaces, query or fragment."
  }
}

variable "jwt_issuer" {
  description = "With auth_mode = jwt, the token issuer URL (e.g. https://cognito-idp.<region>.amazonaws.com/<pool id>)."
  type        = string
  default     = ""
}

variable "jwt_audience" {
  description = "With auth_mode = jwt, the accepted audiences (aud or client_id), comma-separated."
  type        = string
  default     = ""
}

variable "inspector_token_parameter" {
  description = "Name of the SSM SecureString parameter holding the operator token; the API reads it at run time (DORMANT_INSPECTOR_TOKEN_PARAMETER), so the value is never in Terraform's state."
  type        = string
  default     = "/dormant/inspector-token"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_./-]{1,1000}$", var.inspector_token_parameter))
    error_message = "inspector_token_parameter must be an SSM parameter name starting with /."
  }
}

# -- limits -----------------------------------------------------------------------------------------------------
variable "throttling_rate_limit" {
  description = "Steady requests per second the API stage accepts (all callers together); more get 429."
  type        = number
  default     = 50
}

variable "throttling_burst_limit" {
  description = "Requests the API stage accepts in a burst above the rate."
  type        = number
  default     = 100
}

variable "api_reserved_concurrency" {
  description = "Concurrent executions reserved for (and capping) the API function; -1 reserves none."
  type        = number
  default     = 20
}

variable "worker_reserved_concurrency" {
  description = "Concurrent executions reserved for (and capping) the worker; -1 reserves none."
  type        = number
  default     = 10
}

variable "worker_max_concurrency" {
  description = "Concurrent worker invocations each queue's event source starts at most; keep 2 x this <= worker_reserved_concurrency."
  type        = number
  default     = 5

  validation {
    condition     = var.worker_max_concurrency >= 2 && var.worker_max_concurrency <= 1000
    error_message = "worker_max_concurrency must be between 2 and 1000 (Lambda's limits)."
  }
}

variable "max_receives" {
  description = "Receives of a wake-up message before SQS moves it to its dead-letter queue (DORMANT_MAX_RECEIVES)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receives >= 1 && var.max_receives <= 1000
    error_message = "max_receives must be between 1 and 1000."
  }
}

# -- data and operations ----------------------------------------------------------------------------------------
variable "table_deletion_protection" {
  description = "DynamoDB deletion protection of the actor table (the table, the bucket and the queues also carry prevent_destroy)."
  type        = bool
  default     = true
}

variable "data_name_prefix" {
  description = "Names of the table and queues, \"<prefix>-actors\", ...; empty: \"<name>-<stage>\". To change stage without moving the data, set it to the old \"<name>-<old stage>\"."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^([A-Za-z0-9][A-Za-z0-9-]{0,56})?$", var.data_name_prefix))
    error_message = "data_name_prefix: empty, or letters, digits and dashes, at most 57 characters."
  }
}

variable "value_bucket_name" {
  description = "Name of the S3 bucket of large values (DORMANT_BUCKET); empty: a unique name Terraform chooses (bucket names are global). Set it to follow a naming policy, or to the bucket of an earlier deployment."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])?$", var.value_bucket_name))
    error_message = "value_bucket_name: empty, or an S3 bucket name (3 to 63 of a-z 0-9 . -, starting and ending with a letter or a digit)."
  }
}

variable "alarm_topic_arn" {
  description = "SNS topic the alarms notify (dead-letter queues not empty, worker errors); empty = alarms only."
  type        = string
  default     = ""
}

variable "log_retention_days" {
  description = "Days the functions' and the API's CloudWatch logs are kept."
  type        = number
  default     = 30
}

variable "tags" {
  description = "Extra tags for every resource."
  type        = map(string)
  default     = {}
}

variable "snap_start" {
  description = "Lambda SnapStart for both functions (\"PublishedVersions\" turns it on): a cold start restores a snapshot of the initialized function instead of running its init again. Each apply publishes a version behind the alias \"live\", which the queues and the HTTP API invoke."
  type        = string
  default     = "None"

  validation {
    condition     = contains(["None", "PublishedVersions"], var.snap_start)
    error_message = "snap_start: \"None\" or \"PublishedVersions\"."
  }
}

variable "adot_layer_arn" {
  description = "Traces (../docs/observability.md, \"Traces on Lambda\"): the ARN of the AWS Distro for OpenTelemetry Python layer for arm64 in this region. Set, both functions run under it (AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument) with X-Ray active tracing and may write to X-Ray. Empty: no traces."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+)?$", var.adot_layer_arn))
    error_message = "adot_layer_arn: empty, or a Lambda layer version ARN."
  }
}
