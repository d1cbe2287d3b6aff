//! OS::Nova::Server against the loopback Nova (and Neutron, Glance) stand-in.
