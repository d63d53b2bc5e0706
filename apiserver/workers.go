package apiserver

import (
	"context"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// ListWorkers implements WorkerService: the registered remote workers (none
// when the daemon accepts no workers).
func (s *Service) ListWorkers(context.Context, *connect.Request[v1.ListWorkersRequest]) (*connect.Response[v1.ListWorkersResponse], error) {
	return connect.NewResponse(&v1.ListWorkersResponse{Workers: workersToProto(s.D.ListWorkers())}), nil
}
