package run

// A Mirror run records the table's rows after it (store.MirrorCounts.Rows,
// what the volume rule compares Mirror runs by) without counting its
// state, which took 4-5 s for 5 M keys on the Postgres store: a full read
// saw them (the keys this pass read), and a run served by a change feed
// adds its inserts to and takes its deletes from the rows the feed's
// position was committed with (feedMark.Rows). A feed run after a failed
// one may be off by what the failed run applied, until the next full
// read; a feed position committed before this figure existed leaves the
// rows unknown (-1) until then.

// seen is how many keys the run has read so far (the table's rows, once
// a pass has read it all).
func (mr *mirrorRun) seen() int64 { return mr.st.Inserted + mr.st.Updated + mr.st.Unchanged }

// setRows records the table's rows after the run.
func (mr *mirrorRun) setRows(n int64) {
	mr.st.mirrorRows, mr.st.mirrorRowsOK = max(n, 0), true
}

// tableRows is the table's rows after the run, -1 when unknown.
func (s *Stats) tableRows() int64 {
	if !s.mirrorRowsOK {
		return -1
	}
	return s.mirrorRows
}
