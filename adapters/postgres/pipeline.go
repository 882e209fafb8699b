package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
)

// pipeline runs the statements of several sqlc calls in one round trip, a
// pgx batch, and hands each call its own result, in the order given. The
// server runs them one after another, each with a snapshot of its own, as
// it would have run them sent one by one; only the waits between them go.
// So only statements that need no answer of an earlier one (nothing
// decided in Go between them) belong in one pipeline.
//
// Each call makes exactly one statement, and is made twice: against a
// recorder, which queues its statement and answers errRecorded, then
// against the batch's results, whose answer it reads as it would a
// query's. sqlc has no batch of different statements, and pgx's batch
// wants the SQL that sqlc keeps to itself; the two passes join them.
// The first error of a call is returned once every result is read.
func pipeline(ctx context.Context, tx pgx.Tx, calls ...func(db dbsqlc.DBTX) error) error {
	var rec recorder
	for i, call := range calls {
		if err := call(&rec); !errors.Is(err, errRecorded) {
			if err == nil {
				err = errors.New("it made none")
			}
			return fmt.Errorf("pipelined call %d did not make one statement: %w", i, err)
		}
	}
	if rec.batch.Len() != len(calls) {
		return fmt.Errorf("pipelined calls made %d statements, not %d", rec.batch.Len(), len(calls))
	}
	results := replay{tx.SendBatch(ctx, &rec.batch)}
	var first error
	for _, call := range calls {
		if err := call(results); err != nil && first == nil {
			first = err
		}
	}
	if err := results.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// errRecorded is the recorder's answer to every statement.
var errRecorded = errors.New("statement recorded for a pipeline")

// recorder is the DBTX of a pipeline's first pass: it queues each
// statement in its batch.
type recorder struct{ batch pgx.Batch }

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.batch.Queue(sql, args...)
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.batch.Queue(sql, args...)
	return recordedRow{}
}

// recordedRow is the row the recorder answers with.
type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// replay is the DBTX of a pipeline's second pass: each statement's answer
// is the batch's next result; the statement it is given was sent already.
type replay struct{ pgx.BatchResults }

func (r replay) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return r.BatchResults.Exec()
}

func (r replay) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return r.BatchResults.Query()
}

func (r replay) QueryRow(context.Context, string, ...any) pgx.Row {
	return r.BatchResults.QueryRow()
}
