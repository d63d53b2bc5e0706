package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/notify"
	"github.com/claudectl/claudectl/permission"
	"github.com/claudectl/claudectl/store"
)

// NotifyService: a person's devices and the delivery log (package
// notify), and the endpoint a notification's Allow and Deny reach.

// notifier returns the Service's notifier, or the error for its absence.
func (s *Service) notifier() (*notify.Notifier, error) {
	if s.Notify == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("this daemon does not notify anyone"))
	}
	return s.Notify, nil
}

// GetPushConfig implements NotifyService.
func (s *Service) GetPushConfig(ctx context.Context, _ *connect.Request[v1.GetPushConfigRequest]) (*connect.Response[v1.GetPushConfigResponse], error) {
	out := &v1.GetPushConfigResponse{Kinds: store.PushKinds}
	if s.Notify != nil {
		out.VapidPublicKey = s.Notify.VAPIDPublicKey()
	}
	return connect.NewResponse(out), nil
}

// decodeKey reads a subscription key: base64url (the Push API's toJSON),
// padded or not, or standard base64.
func decodeKey(field, v string) ([]byte, error) {
	v = strings.TrimRight(v, "=")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(v)
	}
	if err != nil {
		return nil, invalid(field, v, "must be base64url, as PushSubscription.toJSON() gives it")
	}
	return b, nil
}

func subscriptionToProto(p *store.PushSubscription) *v1.PushSubscription {
	out := &v1.PushSubscription{Id: p.ID, User: p.User, Token: p.Token, Endpoint: p.Endpoint, Kinds: p.Kinds,
		Device: p.Device, CreatedAt: timestamppb.New(p.CreatedAt)}
	if !p.LastPushAt.IsZero() {
		out.LastPushAt = timestamppb.New(p.LastPushAt)
	}
	return out
}

// notifyError maps the notifier's and the store's errors.
func notifyError(err error) error {
	var le *store.LimitError
	switch {
	case errors.Is(err, notify.ErrNoPush):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.As(err, &le):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%v: remove a device first (claudectl notify devices)", le))
	}
	return toConnect(err)
}

// AddPushSubscription implements NotifyService.
func (s *Service) AddPushSubscription(ctx context.Context, req *connect.Request[v1.AddPushSubscriptionRequest]) (*connect.Response[v1.AddPushSubscriptionResponse], error) {
	n, err := s.notifier()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := required("endpoint", m.Endpoint); err != nil {
		return nil, err
	}
	key, err := decodeKey("p256dh", m.P256Dh)
	if err != nil {
		return nil, err
	}
	auth, err := decodeKey("auth", m.Auth)
	if err != nil {
		return nil, err
	}
	kinds := m.Kinds
	if len(kinds) == 0 {
		kinds = store.PushKinds
	}
	id := IdentityOf(ctx)
	p := &store.PushSubscription{User: id.User, Token: id.Token, Endpoint: m.Endpoint, P256DH: key, Auth: auth,
		Kinds: kinds, Device: clip(m.Device)}
	if len(p.Device) > store.MaxNameBytes {
		p.Device = p.Device[:store.MaxNameBytes]
	}
	if err := n.Subscribe(ctx, p); err != nil {
		return nil, notifyError(err)
	}
	return connect.NewResponse(&v1.AddPushSubscriptionResponse{Subscription: subscriptionToProto(p)}), nil
}

// ownDevices returns the devices the caller may manage: their own, or
// every device for a caller who manages tokens (an admin).
func (s *Service) ownDevices(ctx context.Context) ([]*store.PushSubscription, error) {
	n, err := s.notifier()
	if err != nil {
		return nil, err
	}
	id := IdentityOf(ctx)
	user := id.User
	if id.Can(PermTokens) {
		user = ""
	}
	subs, err := n.Devices(ctx, user)
	if err != nil {
		return nil, notifyError(err)
	}
	return subs, nil
}

// ListPushSubscriptions implements NotifyService.
func (s *Service) ListPushSubscriptions(ctx context.Context, _ *connect.Request[v1.ListPushSubscriptionsRequest]) (*connect.Response[v1.ListPushSubscriptionsResponse], error) {
	subs, err := s.ownDevices(ctx)
	if err != nil {
		return nil, err
	}
	out := &v1.ListPushSubscriptionsResponse{}
	for _, p := range subs {
		out.Subscriptions = append(out.Subscriptions, subscriptionToProto(p))
	}
	return connect.NewResponse(out), nil
}

// device finds the caller's device by id or endpoint: NotFound for one
// they may not manage, as for none.
func (s *Service) device(ctx context.Context, id int64, endpoint string) (*store.PushSubscription, error) {
	subs, err := s.ownDevices(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range subs {
		if (id != 0 && p.ID == id) || (id == 0 && endpoint != "" && p.Endpoint == endpoint) {
			return p, nil
		}
	}
	if id == 0 && endpoint == "" {
		return nil, invalid("id", "", "name the device by id or endpoint")
	}
	return nil, notFound("no device %s of yours (claudectl notify devices lists them)", clip(cmpOr(endpoint, strconv.FormatInt(id, 10))))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// UpdatePushSubscription implements NotifyService.
func (s *Service) UpdatePushSubscription(ctx context.Context, req *connect.Request[v1.UpdatePushSubscriptionRequest]) (*connect.Response[v1.UpdatePushSubscriptionResponse], error) {
	p, err := s.device(ctx, req.Msg.Id, "")
	if err != nil {
		return nil, err
	}
	if err := s.Notify.SetKinds(ctx, p.ID, req.Msg.Kinds); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, invalid("kinds", strings.Join(req.Msg.Kinds, ","), err.Error())
		}
		return nil, notifyError(err)
	}
	p.Kinds = req.Msg.Kinds
	return connect.NewResponse(&v1.UpdatePushSubscriptionResponse{Subscription: subscriptionToProto(p)}), nil
}

// RemovePushSubscription implements NotifyService.
func (s *Service) RemovePushSubscription(ctx context.Context, req *connect.Request[v1.RemovePushSubscriptionRequest]) (*connect.Response[v1.RemovePushSubscriptionResponse], error) {
	p, err := s.device(ctx, req.Msg.Id, req.Msg.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := s.Notify.Unsubscribe(ctx, p.ID); err != nil {
		return nil, notifyError(err)
	}
	return connect.NewResponse(&v1.RemovePushSubscriptionResponse{}), nil
}

func deliveryToProto(d *store.Delivery) *v1.Delivery {
	return &v1.Delivery{Id: d.ID, At: timestamppb.New(d.At), Target: d.Target, Event: d.Event, SessionId: d.SessionID,
		RequestId: d.RequestID, Status: d.Status, Attempts: int32(d.Attempts), HttpStatus: int32(d.HTTPStatus), Error: d.Error,
		LatencyMs: d.Latency.Milliseconds()}
}

// ListDeliveries implements NotifyService.
func (s *Service) ListDeliveries(ctx context.Context, req *connect.Request[v1.ListDeliveriesRequest]) (*connect.Response[v1.ListDeliveriesResponse], error) {
	ns, ok := s.Store.(store.Notifications)
	if !ok {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("this daemon keeps no delivery log"))
	}
	limit := int(req.Msg.Limit)
	if limit < 0 || limit > 1000 {
		return nil, invalid("limit", strconv.Itoa(limit), "must be from 0 (100) to 1000")
	}
	ds, err := ns.Deliveries(ctx, store.DeliveryFilter{Target: req.Msg.Target, Limit: limit})
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListDeliveriesResponse{}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, deliveryToProto(d))
	}
	return connect.NewResponse(out), nil
}

// TestWebhooks implements NotifyService.
func (s *Service) TestWebhooks(ctx context.Context, req *connect.Request[v1.TestWebhooksRequest]) (*connect.Response[v1.TestWebhooksResponse], error) {
	n, err := s.notifier()
	if err != nil {
		return nil, err
	}
	ds, err := n.Test(ctx, req.Msg.Name)
	if err != nil {
		return nil, connect.NewError(connect.CodeNotFound, err)
	}
	out := &v1.TestWebhooksResponse{}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, deliveryToProto(d))
	}
	return connect.NewResponse(out), nil
}

// PushActPath is where a notification's action goes: the page's service
// worker POSTs {"cap": CAPABILITY, "action": "allow" | "deny"} there. The
// capability is the credential (no token), so the path is exempt from
// the API token (requireToken); failed capabilities count as failed
// authentications of the remote address.
const PushActPath = "/push/act"

// pushActResult is the answer to a notification's action.
type pushActResult struct {
	// Outcome is "allowed", "denied", or "counted" (an allow of a request
	// that needs more people's).
	Outcome   string   `json:"outcome,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	By        string   `json:"by,omitempty"`
	Approvals []string `json:"approvals,omitempty"`
	Needed    int      `json:"needed,omitempty"`
	Message   string   `json:"message"`
}

// pushAct settles a request from a notification's action: the capability
// (one request, one device, once), then the device's owner as they are
// now (their token live, allowed to decide, the session in its scopes),
// then the decision as that person, routes and the two-person rule
// included; written to the audit trail as any decision.
func (s *Service) pushAct(w http.ResponseWriter, r *http.Request) {
	answer := func(code int, res pushActResult) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(res)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		answer(http.StatusMethodNotAllowed, pushActResult{Message: "POST {\"cap\": …, \"action\": \"allow\" | \"deny\"}"})
		return
	}
	if s.Notify == nil || s.Auth == nil {
		answer(http.StatusNotFound, pushActResult{Message: "this daemon sends no notifications"})
		return
	}
	host := hostOf(r.RemoteAddr)
	if wait := s.Auth.limiter.blocked(host); wait > 0 {
		answer(http.StatusTooManyRequests, pushActResult{Message: fmt.Sprintf("too many failed attempts from %s: try again in %s", host, wait.Round(time.Second)+time.Second)})
		return
	}
	var in struct {
		Cap    string `json:"cap"`
		Action string `json:"action"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&in); err != nil || (in.Action != "allow" && in.Action != "deny") {
		answer(http.StatusBadRequest, pushActResult{Message: "the body must be {\"cap\": …, \"action\": \"allow\" | \"deny\"}"})
		return
	}
	ctx := r.Context()
	c, sub, err := s.Notify.Act(ctx, in.Cap)
	switch {
	case errors.Is(err, notify.ErrBadCapability):
		s.Auth.limiter.fail(host)
		answer(http.StatusForbidden, pushActResult{Message: err.Error() + "; open the page to answer"})
		return
	case errors.Is(err, store.ErrUsed):
		var req string
		if c != nil {
			req = c.RequestID
		}
		answer(http.StatusConflict, pushActResult{RequestID: req, Message: "this notification was answered already (" + err.Error() + ")"})
		return
	case err != nil:
		answer(http.StatusServiceUnavailable, pushActResult{Message: "the daemon cannot check the notification now: " + err.Error()})
		return
	}
	id := s.Auth.identityByName(sub.Token)
	refuse := func(msg string) {
		s.auditPush(ctx, r, sub, c, in.Action, "permission_denied: "+msg)
		answer(http.StatusForbidden, pushActResult{RequestID: c.RequestID, Message: msg})
	}
	switch {
	case id == nil || id.User != sub.User:
		refuse(fmt.Sprintf("the token this device subscribed with (%q) was revoked or expired: subscribe again from the page", sub.Token))
		return
	case !id.Can(PermDecide):
		refuse(fmt.Sprintf("%s may not answer requests (it needs the approver or admin role)", id.describe()))
		return
	}
	if sess, err := s.D.Session(ctx, c.SessionID); err == nil && !id.Sees(sess.ID, sess.Cwd) {
		refuse(id.outOfScope(c.SessionID).Error())
		return
	}
	id.Remote, id.ClientKind = r.RemoteAddr, "push"
	dec := daemon.Decision{RequestID: c.RequestID, Allow: in.Action == "allow", Client: daemon.VerifiedBy(sub.User)}
	if !dec.Allow {
		dec.Message = "Denied by user:" + sub.User + " from a notification."
	}
	d, _, err := s.D.Decide(withIdentity(ctx, id), dec)
	var more *permission.ApprovalsNeededError
	switch {
	case errors.As(err, &more) && d != nil:
		s.auditPush(ctx, r, sub, c, in.Action, "ok")
		answer(http.StatusOK, pushActResult{Outcome: "counted", RequestID: c.RequestID, Tool: d.ToolName, By: d.By,
			Approvals: d.ApprovedBy, Needed: more.Need,
			Message: fmt.Sprintf("Allowed: %d of the %d allows it needs; it waits for another person.", len(d.ApprovedBy), more.Need)})
	case err != nil:
		ce := toConnect(err).(*connect.Error)
		s.auditPush(ctx, r, sub, c, in.Action, ce.Code().String())
		code := http.StatusConflict
		if ce.Code() == connect.CodePermissionDenied {
			code = http.StatusForbidden
		}
		answer(code, pushActResult{RequestID: c.RequestID, Message: ce.Message()})
	default:
		s.auditPush(ctx, r, sub, c, in.Action, "ok")
		outcome := "allowed"
		if d.Behavior != "allow" {
			outcome = "denied"
		}
		answer(http.StatusOK, pushActResult{Outcome: outcome, RequestID: c.RequestID, Tool: d.ToolName, By: d.By,
			Approvals: d.ApprovedBy, Message: fmt.Sprintf("%s %s.", d.ToolName, outcome)})
	}
}

// auditPush writes a notification's action to the audit trail.
func (s *Service) auditPush(ctx context.Context, r *http.Request, sub *store.PushSubscription, c *store.PushCapability, action, outcome string) {
	if s.Store == nil {
		return
	}
	e := &store.AuditEntry{User: sub.User, Token: sub.Token, ClientKind: "push", Remote: r.RemoteAddr, Action: "PushAction",
		SessionID: c.SessionID, Detail: fmt.Sprintf("%s request %s from device %d (%s)", action, c.RequestID, sub.ID, sub.Device),
		Outcome: outcome}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.Store.AddAudit(actx, e); err != nil {
		s.logger().Warn("writing a notification's action to the audit trail", "err", err)
	}
}
