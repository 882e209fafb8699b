// Package db holds the goose migrations, embedded so that the sluice binary
// can migrate the database it serves, and the sqlc queries.
package db

import "embed"

// Migrations are the goose migrations, in file order.
//
//go:embed migrations/*.sql
var Migrations embed.FS
