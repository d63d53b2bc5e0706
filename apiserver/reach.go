package apiserver

import (
	"slices"
	"time"
)

// What package notify asks of the tokens: whether a device's owner may
// still see a session, and decide its requests (a device hears nothing
// once the token it subscribed with is revoked or expired, and its
// notifications' actions are refused), and which groups a user is in.

// identityByName returns the identity of the live token called name (the
// bootstrap token's for BootstrapName), nil when there is none.
func (a *Auth) identityByName(name string) *Identity {
	if name == BootstrapName {
		return &Identity{User: BootstrapName, Token: BootstrapName, Role: RoleAdmin, Bootstrap: true}
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tokens {
		if t.Name == name && t.Live(now) {
			return &Identity{User: t.User, Token: t.Name, Role: t.Role, Dirs: t.Dirs, SessionID: t.SessionID, ExpiresAt: t.ExpiresAt}
		}
	}
	return nil
}

// May reports whether the live token called token, of user, may see the
// session (id, directory), and decide its requests (notify.Access).
func (a *Auth) May(user, token, sessionID, cwd string) (see, decide bool) {
	id := a.identityByName(token)
	if id == nil || id.User != user || !id.Can(PermRead) {
		return false, false
	}
	if sessionID != "" && !id.Sees(sessionID, cwd) {
		return false, false
	}
	return true, id.Can(PermDecide)
}

// Groups returns the groups user is in: the settings' groups that name
// them, and those their identity provider gave at their last sign-in.
func (a *Auth) Groups(user string) []string {
	a.mu.Lock()
	gs := slices.Clone(a.users[user])
	a.mu.Unlock()
	for g, members := range a.groups {
		if slices.Contains(members, user) && !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	slices.Sort(gs)
	return gs
}
