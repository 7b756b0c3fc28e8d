"""The AWS adapter: the DynamoDB event store (`store`, its item codec `items`, the table definition `table`,
responses and events `side`), the SQS transport (`transport`), the worker Lambda's logic (`worker`), the
poller that plays Lambda's SQS event source (`poller`), the service over both (`service`) and request
metering (`metering`). Everything takes an endpoint URL: AWS, a moto server, LocalStack, dynalite."""
