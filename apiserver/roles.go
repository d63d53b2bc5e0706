package apiserver

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/claudectl/claudectl/api/gen/claudectl/v1/claudectlv1connect"
)

// A Permission is what an API method needs of the token that calls it.
type Permission string

// The permissions; roles grant them (roleTable), methods need them
// (methodPermissions).
const (
	// PermAPI is calling the API at all: Health, Whoami, server
	// reflection. Every role has it but worker.
	PermAPI Permission = "api"
	// PermRead is reading sessions, their events, pending requests,
	// rules, decisions and workers.
	PermRead Permission = "sessions.read"
	// PermOperate is creating, prompting, interrupting, resuming, forking
	// and closing sessions, and setting their model and mode.
	PermOperate Permission = "sessions.operate"
	// PermDecide is answering permission requests.
	PermDecide Permission = "decide"
	// PermRules is adding and removing permission rules.
	PermRules Permission = "rules.write"
	// PermTokens is creating, listing and revoking tokens.
	PermTokens Permission = "tokens.manage"
	// PermAudit is reading the audit trail.
	PermAudit Permission = "audit.read"
	// PermWorker is connecting as a remote worker (WorkerPath), and
	// nothing else.
	PermWorker Permission = "worker.connect"
)

// The roles a token may have.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
	RoleApprover = "approver"
	RoleAdmin    = "admin"
	RoleWorker   = "worker"
)

// roleTable is the fixed table of what each role may do; docs/security.md
// shows it (TestDocsRoleTable keeps the two the same).
var roleTable = map[string][]Permission{
	RoleViewer:   {PermAPI, PermRead},
	RoleOperator: {PermAPI, PermRead, PermOperate},
	RoleApprover: {PermAPI, PermRead, PermDecide},
	RoleAdmin:    {PermAPI, PermRead, PermOperate, PermDecide, PermRules, PermTokens, PermAudit},
	RoleWorker:   {PermWorker},
}

// Roles returns the role names, in the order of the role table.
func Roles() []string {
	return []string{RoleViewer, RoleOperator, RoleApprover, RoleAdmin, RoleWorker}
}

// RolePermissions returns what role may do; nil for an unknown role.
func RolePermissions(role string) []Permission { return slices.Clone(roleTable[role]) }

// daemonWide are the permissions that reach past sessions (rules apply
// to every session, tokens make anyone anything): a token scoped to
// directories or a session never has them.
var daemonWide = []Permission{PermRules, PermTokens, PermAudit}

// reflection's procedures: a client that can call the API may read its
// schema.
const (
	reflectV1      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// methodPermissions maps every procedure the daemon serves to the
// permission it needs: the one place that says who may call what. A
// procedure missing here is refused to everyone (TestEveryMethodHasAPermission
// checks that every method of every service is here). The worker path,
// not an RPC, needs PermWorker (requireToken).
var methodPermissions = map[string]Permission{
	claudectlv1connect.SessionServiceCreateSessionProcedure:     PermOperate,
	claudectlv1connect.SessionServiceListSessionsProcedure:      PermRead,
	claudectlv1connect.SessionServiceGetSessionProcedure:        PermRead,
	claudectlv1connect.SessionServiceSendProcedure:              PermOperate,
	claudectlv1connect.SessionServiceTypingProcedure:            PermOperate, // it starts a CLI, as a prompt would
	claudectlv1connect.SessionServiceInterruptProcedure:         PermOperate,
	claudectlv1connect.SessionServiceSetModelProcedure:          PermOperate,
	claudectlv1connect.SessionServiceSetPermissionModeProcedure: PermOperate,
	claudectlv1connect.SessionServiceCloseSessionProcedure:      PermOperate,
	claudectlv1connect.SessionServiceResumeSessionProcedure:     PermOperate,
	claudectlv1connect.SessionServiceForkSessionProcedure:       PermOperate,
	claudectlv1connect.SessionServiceSubscribeProcedure:         PermRead,
	claudectlv1connect.SessionServiceWatchSessionsProcedure:     PermRead,
	claudectlv1connect.SessionServiceGetChangesProcedure:        PermRead,
	claudectlv1connect.SessionServiceMergeChangesProcedure:      PermOperate,
	claudectlv1connect.SessionServiceDiscardWorktreeProcedure:   PermOperate,
	claudectlv1connect.SessionServiceSearchProcedure:            PermRead,
	claudectlv1connect.SessionServiceActivityProcedure:          PermRead,

	claudectlv1connect.PermissionServiceListPendingProcedure:   PermRead,
	claudectlv1connect.PermissionServiceWatchPendingProcedure:  PermRead,
	claudectlv1connect.PermissionServiceDecideProcedure:        PermDecide,
	claudectlv1connect.PermissionServiceListRulesProcedure:     PermRead,
	claudectlv1connect.PermissionServiceAddRuleProcedure:       PermRules,
	claudectlv1connect.PermissionServiceRemoveRuleProcedure:    PermRules,
	claudectlv1connect.PermissionServiceListDecisionsProcedure: PermRead,

	claudectlv1connect.WorkerServiceListWorkersProcedure: PermRead,

	// An approver raises a cap as it answers a request: a held session
	// waits for a person as a permission request does.
	claudectlv1connect.BudgetServiceGetBudgetProcedure:   PermRead,
	claudectlv1connect.BudgetServiceRaiseBudgetProcedure: PermDecide,

	claudectlv1connect.HealthServiceHealthProcedure:        PermAPI,
	claudectlv1connect.HealthServiceHealthDetailsProcedure: PermRead,

	claudectlv1connect.AuthServiceWhoamiProcedure:      PermAPI,
	claudectlv1connect.AuthServiceCreateTokenProcedure: PermTokens,
	claudectlv1connect.AuthServiceListTokensProcedure:  PermTokens,
	claudectlv1connect.AuthServiceRevokeTokenProcedure: PermTokens,
	claudectlv1connect.AuthServiceListAuditProcedure:   PermAudit,

	// A person's devices are their own (the handlers keep each to their
	// own, an admin excepted); anyone who may read may be told.
	claudectlv1connect.NotifyServiceGetPushConfigProcedure:          PermAPI,
	claudectlv1connect.NotifyServiceAddPushSubscriptionProcedure:    PermRead,
	claudectlv1connect.NotifyServiceListPushSubscriptionsProcedure:  PermRead,
	claudectlv1connect.NotifyServiceUpdatePushSubscriptionProcedure: PermRead,
	claudectlv1connect.NotifyServiceRemovePushSubscriptionProcedure: PermRead,
	claudectlv1connect.NotifyServiceListDeliveriesProcedure:         PermAudit,
	claudectlv1connect.NotifyServiceTestWebhooksProcedure:           PermAudit,

	// A terminal's hook makes and drives a session of its own, as an
	// operator does; reading its transcript is reading a session.
	claudectlv1connect.TerminalServiceAskTerminalProcedure:           PermOperate,
	claudectlv1connect.TerminalServiceReportTerminalProcedure:        PermOperate,
	claudectlv1connect.TerminalServiceGetTerminalTranscriptProcedure: PermRead,

	reflectV1:      PermAPI,
	reflectV1Alpha: PermAPI,
}

// audited are the procedures whose every call, allowed or refused, goes
// into the audit trail: what changes a session, a decision, a rule or a
// token.
var audited = map[string]bool{
	claudectlv1connect.SessionServiceCreateSessionProcedure:         true,
	claudectlv1connect.SessionServiceSendProcedure:                  true,
	claudectlv1connect.SessionServiceInterruptProcedure:             true,
	claudectlv1connect.SessionServiceSetModelProcedure:              true,
	claudectlv1connect.SessionServiceSetPermissionModeProcedure:     true,
	claudectlv1connect.SessionServiceCloseSessionProcedure:          true,
	claudectlv1connect.SessionServiceResumeSessionProcedure:         true,
	claudectlv1connect.SessionServiceForkSessionProcedure:           true,
	claudectlv1connect.PermissionServiceDecideProcedure:             true,
	claudectlv1connect.SessionServiceMergeChangesProcedure:          true,
	claudectlv1connect.SessionServiceDiscardWorktreeProcedure:       true,
	claudectlv1connect.BudgetServiceRaiseBudgetProcedure:            true,
	claudectlv1connect.PermissionServiceAddRuleProcedure:            true,
	claudectlv1connect.PermissionServiceRemoveRuleProcedure:         true,
	claudectlv1connect.AuthServiceCreateTokenProcedure:              true,
	claudectlv1connect.AuthServiceRevokeTokenProcedure:              true,
	claudectlv1connect.NotifyServiceAddPushSubscriptionProcedure:    true,
	claudectlv1connect.NotifyServiceUpdatePushSubscriptionProcedure: true,
	claudectlv1connect.NotifyServiceRemovePushSubscriptionProcedure: true,
	claudectlv1connect.NotifyServiceTestWebhooksProcedure:           true,
}

// BootstrapName is the user and token name of the daemon's own token (the
// token file, or token_file): an admin, shared by whoever holds the file.
const BootstrapName = "bootstrap"

// An Identity is who a request's token says the caller is, as verified by
// the daemon, with what the client said of itself (as hints).
type Identity struct {
	User  string
	Token string
	Role  string
	// Dirs and SessionID are the token's scopes (none when empty).
	Dirs      []string
	SessionID string
	ExpiresAt time.Time
	// Bootstrap is set for the daemon's own token.
	Bootstrap bool
	// ClientKind is what the client says it is: "page", "cli" or "api"
	// (ClientHeader).
	ClientKind string
	// Remote is the client's address.
	Remote string
}

// ClientHeader is the header claudectl's clients send to say what they
// are ("cli", "page"); the audit trail records it as a hint. Others are
// "api".
const ClientHeader = "Claudectl-Client"

// ownerIdentity is who a request is when the server checks no token (a
// handler served without NewServer's token): the daemon's owner.
var ownerIdentity = &Identity{User: BootstrapName, Token: BootstrapName, Role: RoleAdmin, Bootstrap: true, ClientKind: "api"}

type identityKey struct{}

func withIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityOf returns the verified identity of a request's context.
func IdentityOf(ctx context.Context) *Identity {
	if id, ok := ctx.Value(identityKey{}).(*Identity); ok {
		return id
	}
	return ownerIdentity
}

// Can reports whether id's role grants p.
func (id *Identity) Can(p Permission) bool {
	if !slices.Contains(roleTable[id.Role], p) {
		return false
	}
	return !id.Scoped() || !slices.Contains(daemonWide, p)
}

// Scoped reports whether id is limited to directories or a session.
func (id *Identity) Scoped() bool { return len(id.Dirs) > 0 || id.SessionID != "" }

// InDirs reports whether a session directory is within id's directory
// scope: one of them or below one.
func (id *Identity) InDirs(cwd string) bool {
	if len(id.Dirs) == 0 {
		return true
	}
	// A directory is compared as the file system resolves it, as its
	// scopes were when the token was made: a symlink inside a scope
	// leads nowhere outside it.
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	} else {
		cwd = filepath.Clean(cwd)
	}
	for _, d := range id.Dirs {
		if Within(d, cwd) {
			return true
		}
	}
	return false
}

// Sees reports whether a session (its id and directory) is within id's
// scopes.
func (id *Identity) Sees(sessionID, cwd string) bool {
	return (id.SessionID == "" || id.SessionID == sessionID) && id.InDirs(cwd)
}

// Within reports whether path is dir or below it; both are cleaned
// absolute paths.
func Within(dir, path string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// describe names the token and its role for an error: `token "phone"
// (role approver)`.
func (id *Identity) describe() string {
	return fmt.Sprintf("token %q (user %q, role %s)", id.Token, id.User, id.Role)
}

// scopeWords says what a scoped token is limited to.
func (id *Identity) scopeWords() string {
	var parts []string
	if len(id.Dirs) > 0 {
		parts = append(parts, "directories "+strings.Join(id.Dirs, ", "))
	}
	if id.SessionID != "" {
		parts = append(parts, "session "+id.SessionID)
	}
	return strings.Join(parts, " and ")
}

// require checks that id may call procedure, which needs p: a
// PermissionDenied error naming what was needed and what the token has.
func (id *Identity) require(procedure string, p Permission) error {
	if id.Can(p) {
		return nil
	}
	method := procedure[strings.LastIndexByte(procedure, '/')+1:]
	switch {
	case id.Role == RoleWorker:
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"%s is a worker token: it connects remote workers (claudectl worker) and cannot call the API (%s)", id.describe(), method))
	case slices.Contains(roleTable[id.Role], p): // daemon-wide, and the token is scoped
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
			"%s needs permission %q, which reaches every session; this %s is scoped to %s: use an unscoped admin token",
			method, p, id.describe(), id.scopeWords()))
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
		"%s needs permission %q (role %s), and this %s does not have it (claudectl whoami shows what a token may do)",
		method, p, rolesWith(p), id.describe()))
}

// rolesWith names the roles that grant p: "approver or admin".
func rolesWith(p Permission) string {
	var rs []string
	for _, r := range Roles() {
		if slices.Contains(roleTable[r], p) {
			rs = append(rs, r)
		}
	}
	return strings.Join(rs, " or ")
}

// outOfScope is the PermissionDenied of a session outside id's scopes.
func (id *Identity) outOfScope(sessionID string) error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
		"session %q is outside the scope of %s: it may reach only %s", clip(sessionID), id.describe(), id.scopeWords()))
}

// MethodPermission returns the permission a procedure needs, and whether
// it has one.
func MethodPermission(procedure string) (Permission, bool) {
	p, ok := methodPermissions[procedure]
	return p, ok
}
