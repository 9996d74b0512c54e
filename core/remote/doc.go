// Package remote reads and writes objects over HTTP(S) and the S3 API for the core's
// remote data source: positioned range reads of many spans at once on a bounded pool of
// keep-alive connections, object size and ETag, listing a prefix, and multipart upload.
//
// S3 requests are signed with AWS Signature Version 4 by aws-sdk-go-v2's signer, with
// credentials found as the AWS SDKs find them (AWS_* environment variables, the shared
// config and credentials files, a profile). Every request has a deadline; transport
// failures, 5xx, 429 and 503 answers are retried with exponential backoff within a
// bounded number of attempts; 403 is reported as a permission error and 404 as a
// missing file (both wrap the matching syscall.Errno, so callers see the usual OS error
// classes).
package remote
