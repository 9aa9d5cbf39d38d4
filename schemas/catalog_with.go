package schemas

import "slices"

// WithReservations returns a copy of the catalog in which project holds
// exactly the reservations rs: same currency, zone, defaults, discounts, SKUs
// and project rules, so that usage billed under it differs from the original
// only by those reservations (what-if pricing). A project the catalog does not
// list is added with the defaults. The reservations are taken as given: each
// must name a SKU of the catalog that has a monthly price. The original is not
// changed.
func (c *Catalog) WithReservations(project string, rs []Reservation) *Catalog {
	out := *c
	out.Projects = slices.Clone(c.Projects)
	i, ok := c.projByID[project]
	if !ok {
		out.projByID = make(map[string]int, len(c.projByID)+1)
		for k, v := range c.projByID {
			out.projByID[k] = v
		}
		i = len(out.Projects)
		out.projByID[project] = i
		out.Projects = append(out.Projects, Project{ID: project})
	}
	out.Projects[i].Reservations = slices.Clone(rs)
	return &out
}
