package sqltx

import (
	"context"
	"database/sql"
	"sync"
)

// Statements keeps the statements a backend's transactions ran, prepared once and
// reused: parsing and planning a statement anew in every transaction is a large part of
// a claim's cost on SQLite. A transaction uses a statement prepared earlier; one it has
// not seen yet runs unprepared and is noted, and PrepareNoted prepares it once the
// transaction has ended (preparing on the database while the backend's one connection
// is held by a transaction would wait for that transaction forever).
type Statements struct {
	db  *sql.DB
	max int

	mu       sync.Mutex
	prepared map[string]*sql.Stmt
	noted    map[string]bool
}

// NewStatements keeps up to max prepared statements of db.
func NewStatements(db *sql.DB, max int) *Statements {
	return &Statements{db: db, max: max, prepared: map[string]*sql.Stmt{}, noted: map[string]bool{}}
}

// lookup is q's prepared statement, or nil (and q is noted for PrepareNoted).
func (s *Statements) lookup(q string) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.prepared[q]; st != nil {
		return st
	}
	if len(s.prepared)+len(s.noted) < s.max {
		s.noted[q] = true
	}
	return nil
}

// PrepareNoted prepares the statements transactions ran unprepared. Call it with no
// transaction of this database open in this goroutine.
func (s *Statements) PrepareNoted(ctx context.Context) error {
	s.mu.Lock()
	noted := s.noted
	s.noted = map[string]bool{}
	s.mu.Unlock()
	for q := range noted {
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.prepared[q] == nil {
			s.prepared[q], st = st, nil
		}
		s.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
	return nil
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

// stmt is q's prepared statement in this transaction, or nil.
func (t *Tx) stmt(q string) *sql.Stmt {
	if t.Statements == nil {
		return nil
	}
	st := t.Statements.lookup(q)
	if st == nil {
		return nil
	}
	return t.SQL.Stmt(st)
}

// Len is how many statements are prepared.
func (s *Statements) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prepared)
}
