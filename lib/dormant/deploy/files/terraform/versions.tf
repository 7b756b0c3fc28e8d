terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.100 (the provider this module is tested with offline) and 6.x
      version = ">= 5.100, < 7.0"
    }
  }
}
