// Package sluice is the root of the Sluice module. It carries the OpenAPI
// contract, embedded so that the server can publish it at /openapi.yaml
// exactly as it was generated from.
package sluice

import _ "embed"

// OpenAPISpec is openapi.yaml, the single source of the HTTP contract.
//
//go:embed openapi.yaml
var OpenAPISpec []byte
