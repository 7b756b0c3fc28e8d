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
  description = "DORMANT_APP: the registry the functions serve, as module:attribute; its package comes from app_source_dir."
  type        = string
  default     = "examples.app:registry"

  validation {
    condition     = can(regex("^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$", var.app))
    error_message = "app must be module:attribute, e.g. myapp.actors:registry."
  }
}

variable "app_source_dir" {
  description = "Directory of the registry's package (bundled under its own name next to dormant/). Default: the repository's examples/."
  type        = string
  default     = null
}

variable "source_root" {
  description = "The Dormant repository (lib/ and functions/ are read from it). Default: the parent of this module."
  type        = string
  default     = null
}

variable "layer_dir" {
  description = "Directory built by `make lambda-layer` (python/ with the dependencies for python3.13 on arm64). Default: <source_root>/build/lambda/layer."
  type        = string
  default     = null
}

variable "inspector_token_parameter" {
  description = "Name of the SSM parameter (String or SecureString) holding the inspector bearer token (DORMANT_INSPECTOR_TOKEN)."
  type        = string
  default     = "/dormant/inspector-token"
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

variable "table_deletion_protection" {
  description = "DynamoDB deletion protection of the actor table (turn it on in production)."
  type        = bool
  default     = false
}

variable "log_retention_days" {
  description = "Days the functions' CloudWatch logs are kept."
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
