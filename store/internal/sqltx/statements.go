package sqltx

import (
	"context"
	"database/sql"
	"sync"
)

// Statements keeps the statements a backend's transactions ran, prepared once on the
// one connection those transactions run on and reused: parsing and planning a statement
// anew in every transaction is a large part of a claim's cost on SQLite. A statement is
// prepared the first time a transaction runs it; past max statements the rest run
// unprepared.
type Statements struct {
	conn *sql.Conn
	max  int

	mu       sync.Mutex
	prepared map[string]*sql.Stmt
}

// NewStatements keeps up to max prepared statements on conn, the connection every Tx
// that uses them runs on.
func NewStatements(conn *sql.Conn, max int) *Statements {
	return &Statements{conn: conn, max: max, prepared: map[string]*sql.Stmt{}}
}

// lookup is q's prepared statement, prepared now if it is new, or nil: past max, or if
// it does not prepare (running it unprepared then reports why).
func (s *Statements) lookup(q string) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.prepared[q]; st != nil || len(s.prepared) >= s.max {
		return st
	}
	st, err := s.conn.PrepareContext(context.Background(), q)
	if err != nil {
		return nil
	}
	s.prepared[q] = st
	return st
}

// Exec runs q, prepared once, on the connection, outside any Tx: a backend's BEGIN,
// COMMIT and ROLLBACK.
func (s *Statements) Exec(ctx context.Context, q string) error {
	var err error
	if st := s.lookup(q); st != nil {
		_, err = st.ExecContext(ctx)
	} else {
		_, err = s.conn.ExecContext(ctx, q)
	}
	return err
}

// Close closes every prepared statement.
func (s *Statements) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q, st := range s.prepared {
		st.Close()
		delete(s.prepared, q)
	}
	return nil
}

// stmt is q's prepared statement, or nil.
func (t *Tx) stmt(q string) *sql.Stmt {
	if t.Statements == nil {
		return nil
	}
	return t.Statements.lookup(q)
}

// Len is how many statements are prepared.
func (s *Statements) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prepared)
}
