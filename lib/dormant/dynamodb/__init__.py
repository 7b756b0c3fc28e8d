"""The event store on DynamoDB (and anything that speaks its API: DynamoDB Local, moto, LocalStack, dynalite):
one table, single-item conditional commits (docs/storage.md). Values too big for an item go to S3 (dormant.s3).

    from dormant.dynamodb.store import DynamoEventStore
"""
