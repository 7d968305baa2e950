package amplitude

import (
	"context"
	"net/http"
)

// List reports the jobs of one project, oldest first, with the live
// figures of those running here.
func (s *Service) List(ctx context.Context, project int64) ([]Status, error) {
	jobs, err := s.cfg.Jobs.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []Status{}
	for _, j := range jobs {
		if j.ProjectID != project {
			continue
		}
		st, err := s.Status(ctx, j.ID) // this process's live figures when it runs the job
		if err != nil {
			st = j.status(s.cfg.Now())
		}
		out = append(out, st)
	}
	return out, nil
}

// handleList answers GET /amplitude?project_id=N: {"jobs":[status…]}, any
// credential of the project (as a job's status).
func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	p, err := s.cfg.Projects.Request(r, statusAllowed)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "a credential of the project is required (Basic auth: the project token or API secret as user name, or a service account, with project_id)")
		return
	}
	jobs, err := s.List(r.Context(), p.Project.ID)
	if err != nil {
		s.refused(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}
