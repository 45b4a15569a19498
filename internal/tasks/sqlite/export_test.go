package sqlite

// Pragmas answers the journal mode and synchronous level in force.
func Pragmas(s *Store) (journalMode string, synchronous int, err error) {
	if err = s.c.db.QueryRow(`PRAGMA journal_mode`).Scan(&journalMode); err != nil {
		return "", 0, err
	}
	err = s.c.db.QueryRow(`PRAGMA synchronous`).Scan(&synchronous)
	return journalMode, synchronous, err
}
