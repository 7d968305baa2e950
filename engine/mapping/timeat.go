package mapping

// TimeAt returns the time column's value at row i of the batch last
// given to Map, in ms since the epoch; msg is non-empty when the value
// cannot be used (NULL, unparsable) or there is no time column. A
// History import maps its start column as the time column (importspec
// ForHistory) and reads each version's start here.
func (m *Mapper) TimeAt(i int) (ms int64, msg string) {
	if m.tm < 0 || m.roots[m.tm].arr == nil || i < 0 || i >= m.roots[m.tm].arr.Len() {
		return 0, "no time column"
	}
	return timeMs(&m.roots[m.tm], i)
}
