// Package amptest is a stand-in for Amplitude's Export API, for tests and
// benchmarks. It speaks the real wire protocol as Amplitude documents it
// (public-interface-facts §5.3): GET /api/2/export?start=YYYYMMDDTHH&end=…
// with HTTP Basic auth answers a zip archive holding a folder named by the
// project id, and in it one or more gzipped NDJSON files per hour,
// "<project>_<yyyy-MM-dd>_<H>#<partition>.json.gz", one event per line,
// selected by server_upload_time; 404 when the range holds no event, 400
// when it is "over 4 GB" (here: more hours with data than MaxHours), 401
// for wrong credentials, and any status queued with FailNext.
package amptest

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

const hourLayout = "20060102T15"

// Request is one request the server answered.
type Request struct {
	Start, End string // as sent
	Status     int
}

// Server is a running fake export endpoint.
type Server struct {
	*httptest.Server
	Key, Secret string
	ProjectID   int
	// MaxHours: a request whose range has data in more hours is refused
	// with 400, as Amplitude refuses exports over 4 GB. 0: no limit.
	MaxHours int
	// PartitionSize: lines per file; an hour with more has several
	// partitions, as busy Amplitude hours do. Default 1000.
	PartitionSize int
	// OnRequest, if set, runs before each answer (to block or count).
	OnRequest func(start, end time.Time)
	// Cache keeps built archives by range, so that a benchmark measures
	// the client rather than this server's gzip.
	Cache bool

	mu       sync.Mutex
	hours    map[time.Time][][]byte // server_upload_time hour → lines
	failNext map[string][]int       // start param → statuses to answer first
	requests []Request
	cache    map[string][]byte
}

// New starts a server that accepts key:secret.
func New(key, secret string) *Server {
	s := &Server{Key: key, Secret: secret, ProjectID: 187520, PartitionSize: 1000,
		hours: map[time.Time][][]byte{}, failNext: map[string][]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddLine stores one raw export line under the hour it was uploaded in.
func (s *Server) AddLine(uploaded time.Time, line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := uploaded.UTC().Truncate(time.Hour)
	s.hours[h] = append(s.hours[h], slices.Clone(line))
	s.cache = nil
}

// Add stores an event; its server_upload_time ("2006-01-02 15:04:05.000000")
// picks the hour.
func (s *Server) Add(event map[string]any) error {
	line, err := json.Marshal(event)
	if err != nil {
		return err
	}
	up, _ := event["server_upload_time"].(string)
	t, err := time.Parse("2006-01-02 15:04:05.999999", up)
	if err != nil {
		return fmt.Errorf("amptest: event without a valid server_upload_time: %w", err)
	}
	s.AddLine(t, line)
	return nil
}

// FailNext makes the next requests starting at start answer these
// statuses, in order, before the real answer.
func (s *Server) FailNext(start time.Time, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := start.UTC().Format(hourLayout)
	s.failNext[k] = append(s.failNext[k], statuses...)
}

// Requests returns what was asked so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := Request{Start: q.Get("start"), End: q.Get("end")}
	status := s.answer(w, r, req)
	s.mu.Lock()
	req.Status = status
	s.requests = append(s.requests, req)
	s.mu.Unlock()
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, req Request) int {
	fail := func(status int, msg string) int {
		http.Error(w, msg, status)
		return status
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/2/export" {
		return fail(http.StatusNotFound, "not found")
	}
	if k, sec, ok := r.BasicAuth(); !ok || k != s.Key || sec != s.Secret {
		return fail(http.StatusUnauthorized, "Invalid API key")
	}
	start, err1 := time.Parse(hourLayout, req.Start)
	end, err2 := time.Parse(hourLayout, req.End)
	if err1 != nil || err2 != nil || end.Before(start) {
		return fail(http.StatusBadRequest, "Invalid start or end")
	}
	if s.OnRequest != nil {
		s.OnRequest(start, end)
	}
	s.mu.Lock()
	if q := s.failNext[req.Start]; len(q) > 0 {
		s.failNext[req.Start] = q[1:]
		s.mu.Unlock()
		return fail(q[0], http.StatusText(q[0]))
	}
	var hours []time.Time
	for h := range s.hours {
		if !h.Before(start) && !h.After(end) {
			hours = append(hours, h)
		}
	}
	slices.SortFunc(hours, func(a, b time.Time) int { return a.Compare(b) })
	if len(hours) == 0 {
		s.mu.Unlock()
		return fail(http.StatusNotFound, "No data for the given time range")
	}
	if s.MaxHours > 0 && len(hours) > s.MaxHours {
		s.mu.Unlock()
		return fail(http.StatusBadRequest, "Raw data export exceeds the maximum size of 4GB. Please export a smaller time range.")
	}
	lines := make(map[time.Time][][]byte, len(hours))
	for _, h := range hours {
		lines[h] = s.hours[h]
	}
	key := req.Start + "-" + req.End
	body, cached := s.cache[key]
	s.mu.Unlock()
	if !cached {
		var err error
		if body, err = s.archive(hours, lines); err != nil {
			return fail(http.StatusInternalServerError, err.Error())
		}
		if s.Cache {
			s.mu.Lock()
			if s.cache == nil {
				s.cache = map[string][]byte{}
			}
			s.cache[key] = body
			s.mu.Unlock()
		}
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	_, _ = w.Write(body)
	return http.StatusOK
}

// archive builds the zip: <project>/ and, per hour and partition, a
// gzipped NDJSON file.
func (s *Server) archive(hours []time.Time, lines map[time.Time][][]byte) ([]byte, error) {
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	dir := fmt.Sprintf("%d/", s.ProjectID)
	if _, err := zw.Create(dir); err != nil {
		return nil, err
	}
	part := max(s.PartitionSize, 1)
	for _, h := range hours {
		ls := lines[h]
		for p := 0; p*part < len(ls); p++ {
			name := fmt.Sprintf("%s%d_%s_%d#%d.json.gz", dir, s.ProjectID, h.Format("2006-01-02"), h.Hour(), p)
			// The files are gzip already: stored, as Amplitude's are.
			f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: h})
			if err != nil {
				return nil, err
			}
			gz := gzip.NewWriter(f)
			for _, l := range ls[p*part : min((p+1)*part, len(ls))] {
				gz.Write(l)
				gz.Write([]byte{'\n'})
			}
			if err := gz.Close(); err != nil {
				return nil, err
			}
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
